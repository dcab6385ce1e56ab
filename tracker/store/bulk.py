"""Bulk "insert the rows whose key is new" on each engine, at close to the engine's bare speed.

The store knows no metric and no validation: callers pass already-checked rows as tuples in
the order of ``columns``, with instants as epoch microseconds and lists/documents as Python
lists/dicts. Each engine gets its fastest safe path:

- PostgreSQL: text ``COPY`` into a session-local staging table, then one
  ``INSERT ... SELECT ... ON CONFLICT (key) DO NOTHING RETURNING key``. Concurrent writers of the
  same key are serialised by the unique index: exactly one stores it.
- SQLite: the write lock is held from ``BEGIN IMMEDIATE`` (see :mod:`tracker.store.db`), so
  ``executemany`` of ``INSERT ... ON CONFLICT DO NOTHING`` runs alone; when fewer rows went in
  than were sent, the new ids (above the maximum before the insert) say which.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

_PG_SCALARS = {
    sa.String: "text", sa.Text: "text", sa.BigInteger: "int8", sa.Integer: "int4",
    sa.Double: "float8", sa.Float: "float8",
}


def _pg_type(column: sa.Column) -> str:
    col_type = column.type
    variant = getattr(col_type, "_variant_mapping", {}).get("postgresql")
    if variant is not None:
        col_type = variant
    if isinstance(col_type, sa.types.TypeDecorator):
        col_type = col_type.impl_instance
    if isinstance(col_type, postgresql.JSONB):
        return "jsonb"
    if isinstance(col_type, postgresql.ARRAY):
        return _pg_type(sa.Column("x", col_type.item_type)) + "[]"
    for base, name in _PG_SCALARS.items():
        if isinstance(col_type, base):
            return name
    raise TypeError(f"no COPY type for column {column.name} of type {col_type!r}")


def _is_json_on_sqlite(column: sa.Column) -> bool:
    return isinstance(column.type, sa.JSON)


def insert_new(conn: sa.Connection, table: sa.Table, columns: Sequence[str], key: str,
               rows: Sequence[tuple], prepared: Prepared | None = None) -> list[str]:
    """Insert the rows whose ``key`` column value is not stored yet; return the keys inserted.

    Keys must be unique within ``rows``. Runs inside the caller's transaction. ``prepared``:
    the rows already encoded by :func:`prepare` (e.g. on another thread than the writer's).
    """
    if not rows:
        return []
    prepared = prepared or prepare(conn.dialect.name, table, columns, rows)
    if prepared.dialect != conn.dialect.name:
        raise ValueError(f"rows prepared for {prepared.dialect}, written to {conn.dialect.name}")
    if conn.dialect.name == "postgresql":
        return _insert_new_postgresql(conn, table, columns, key, rows, prepared.rows)
    if conn.dialect.name == "sqlite":
        return _insert_new_sqlite(conn, table, columns, key, rows, prepared.rows)
    raise NotImplementedError(f"bulk insert on {conn.dialect.name}")


class Prepared(NamedTuple):
    """Rows encoded for one database's bulk path (array literals, JSON text)."""

    dialect: str
    rows: list


def prepare(dialect: str, table: sa.Table, columns: Sequence[str],
            rows: Sequence[tuple]) -> Prepared:
    """Encode rows for :func:`insert_new` on ``dialect`` ("postgresql" or "sqlite")."""
    if dialect == "postgresql":
        encoders = [_PG_TEXT_ENCODERS.get(_pg_type(table.c[name])) for name in columns]
        return Prepared(dialect, _copy_text(_encode_rows(rows, encoders)))
    json_at = [i for i, name in enumerate(columns) if _is_json_on_sqlite(table.c[name])]
    if not json_at:
        return Prepared(dialect, list(rows))
    dumps = _PG_TEXT_ENCODERS["jsonb"]
    return Prepared(dialect, _encode_rows(
        rows, [dumps if i in json_at else None for i in range(len(columns))]))


def _text_array(values: list[str]) -> str:
    """A PostgreSQL array literal of strings: every element quoted, so "NULL" stays text."""
    joined = '","'.join(values)
    if joined.count('"') != 2 * (len(values) - 1) or "\\" in joined:  # only separators quote
        joined = '","'.join(v.replace("\\", "\\\\").replace('"', '\\"') for v in values)
    return '{"' + joined + '"}'


def _float_array(values: list[float]) -> str:
    return "{" + repr(values)[1:-1] + "}"  # float repr round-trips exactly


_PG_TEXT_ENCODERS = {"text[]": _text_array, "float8[]": _float_array,
                     "jsonb": json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode}


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_field(value) -> str:
    if value is None:
        return "\\N"
    if type(value) is str:
        if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
            return value.translate(_COPY_ESCAPES)
        return value
    return str(value)


def _copy_text(rows: list[list]) -> bytes:
    """The rows as one COPY text-format payload (tab-separated, escaped, NULL as \\N), built
    ahead so that the writer sends it in one call instead of one Python call per row."""
    field = _copy_field
    return "".join(["\t".join([field(v) for v in row]) + "\n" for row in rows]).encode()


def _encode_rows(rows, encoders: list) -> list[list]:
    at = [(i, enc) for i, enc in enumerate(encoders) if enc is not None]
    encoded = []
    for row in rows:
        row = list(row)
        for i, enc in at:
            if row[i] is not None:
                row[i] = enc(row[i])
        encoded.append(row)
    return encoded


_UNIQUE_VIOLATION = "23505"


def _insert_new_postgresql(conn, table, columns, key, rows, encoded) -> list[str]:
    # Text COPY with array literals built by prepare(): psycopg dumps arrays for binary COPY
    # in pure Python, ~3x slower than this (benchmarks/README.md).
    col_list = ", ".join(columns)
    key_at = list(columns).index(key)
    keys = [row[key_at] for row in rows]
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:
        # Fast path: none of the keys is stored yet (the common case of fresh logs), so COPY
        # straight into the table. A concurrent writer may store one of them in between: the
        # unique index then refuses the COPY, and the savepoint lets the slow path take over.
        cur.execute(f"SELECT 1 FROM {table.name} WHERE {key} = ANY(%s) LIMIT 1", (keys,))
        if cur.fetchone() is None:
            cur.execute("SAVEPOINT tracker_copy")
            try:
                with cur.copy(f"COPY {table.name} ({col_list}) FROM STDIN") as copy:
                    copy.write(encoded)
            except Exception as error:  # the driver's UniqueViolation (SQLSTATE 23505)
                if getattr(error, "sqlstate", None) != _UNIQUE_VIOLATION:
                    raise
                cur.execute("ROLLBACK TO SAVEPOINT tracker_copy")
            else:
                cur.execute("RELEASE SAVEPOINT tracker_copy")
                return keys
        # Slow path: COPY into a staging table, then insert what is new.
        stage = f"tracker_stage_{table.name}"
        cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS "
                    f"SELECT {col_list} FROM {table.name} WITH NO DATA")
        with cur.copy(f"COPY {stage} ({col_list}) FROM STDIN") as copy:
            copy.write(encoded)
        cur.execute(f"INSERT INTO {table.name} ({col_list}) SELECT {col_list} FROM {stage} "
                    f"ON CONFLICT ({key}) DO NOTHING RETURNING {key}")
        inserted = [r[0] for r in cur.fetchall()]
        cur.execute(f"TRUNCATE {stage}")
    return inserted


def _insert_new_sqlite(conn, table, columns, key, rows, encoded) -> list[str]:
    rows = encoded
    raw = conn.connection.driver_connection
    cur = raw.cursor()
    try:
        max_before = cur.execute(f"SELECT coalesce(max(id), 0) FROM {table.name}").fetchone()[0]
        marks = ", ".join("?" * len(columns))
        cur.executemany(f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({marks}) "
                        f"ON CONFLICT ({key}) DO NOTHING", rows)
        if cur.rowcount == len(rows):
            key_at = list(columns).index(key)
            return [row[key_at] for row in rows]
        return [r[0] for r in cur.execute(
            f"SELECT {key} FROM {table.name} WHERE id > ?", (max_before,))]
    finally:
        cur.close()


def fetch_by_keys(conn: sa.Connection, table: sa.Table, columns: Sequence[str], key: str,
                  keys: Sequence[str], chunk: int = 5000) -> dict[str, tuple[Any, ...]]:
    """Stored rows for ``keys``, in the same encoding :func:`insert_new` takes
    (microseconds, Python lists and dicts), keyed by ``key``."""
    plain = sa.table(table.name, *(sa.column(name) for name in (key, *columns)))
    decode_at = ([i for i, name in enumerate(columns) if _is_json_on_sqlite(table.c[name])]
                 if conn.dialect.name == "sqlite" else [])
    found: dict[str, tuple[Any, ...]] = {}
    keys = list(keys)
    for start in range(0, len(keys), chunk):
        part = keys[start:start + chunk]
        query = sa.select(*plain.c).where(plain.c[key].in_(part))
        for row in conn.execute(query):
            values = list(row[1:])
            for i in decode_at:
                if values[i] is not None:
                    values[i] = json.loads(values[i])
            found[row[0]] = tuple(values)
    return found
