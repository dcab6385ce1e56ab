"""Bulk "insert the rows whose key is new" on each engine, at close to the engine's bare speed.

The store knows no metric and no validation: callers pass already-checked rows as tuples in
the order of ``columns``, with instants as epoch microseconds and lists/documents as Python
lists/dicts. Each engine gets its fastest safe path:

- PostgreSQL: binary ``COPY`` (psycopg's C dumpers write the Python lists as arrays; measured
  ~1.5x less client CPU than building text array literals in Python, and cheaper for the server
  to parse). :func:`copy_new` COPYs straight into the table, in a transaction of its own; when
  one of the keys is stored already (a retry, or a concurrent writer of the same id: the unique
  index refuses the COPY) the caller rolls back and :func:`insert_new` COPYs into a
  session-local staging table, then runs one
  ``INSERT ... SELECT ... ON CONFLICT (key) DO NOTHING RETURNING key``. Concurrent writers of the
  same key are serialised by the unique index: exactly one stores it.
- SQLite: the write lock is held from ``BEGIN IMMEDIATE`` (see :mod:`tracker.store.db`), so
  ``executemany`` of ``INSERT ... ON CONFLICT DO NOTHING`` runs alone; when fewer rows went in
  than were sent, the new ids (above the maximum before the insert) say which.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

IN_LIST_LIMIT = 5000
"""Values in one ``IN`` list or rows in one statement's parameters, at the most: SQLite
binds fewer than 32,766 parameters a statement."""


def one_of(conn: sa.Connection, column: sa.ColumnElement, values: Sequence[str]
           ) -> sa.ColumnElement[bool]:
    """A condition selecting the rows whose text ``column`` is one of ``values``, the
    values bound as one parameter whatever their number, so one statement reads them all:
    ``= ANY(array)`` on PostgreSQL, ``IN`` the elements of a JSON array (``json_each``,
    probing the primary key) on SQLite. Chunked ``IN`` lists, one parameter a value, cost
    SQLAlchemy ~4 us a value to render, and PostgreSQL one plan and, when the planner
    scans the experiment's rows rather than probe the index, one scan a chunk: 20 scans
    of 300,000 rows to find 100,000 users, measured 4.4 s against 0.6 s."""
    values = list(values)
    if conn.dialect.name == "postgresql":
        return column == sa.any_(sa.literal(values, postgresql.ARRAY(sa.Text)))
    listed = sa.func.json_each(sa.literal(json.dumps(values), sa.Text))
    return column.in_(sa.select(sa.literal_column("value")).select_from(listed))


_PG_SCALARS = {
    sa.String: "text", sa.Text: "text", sa.BigInteger: "int8", sa.Integer: "int4",
    sa.Double: "float8", sa.Float: "float8", sa.LargeBinary: "bytea", sa.Date: "date",
    sa.Boolean: "bool",
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
    prepared = prepared or prepare(conn.dialect.name, table, columns, rows, key)
    if prepared.dialect != conn.dialect.name:
        raise ValueError(f"rows prepared for {prepared.dialect}, written to {conn.dialect.name}")
    if conn.dialect.name == "postgresql":
        return _insert_new_postgresql(conn, table, columns, key, rows, prepared.rows)
    if conn.dialect.name == "sqlite":
        return _insert_new_sqlite(conn, table, columns, key, rows, prepared.rows)
    raise NotImplementedError(f"bulk insert on {conn.dialect.name}")


class Prepared(NamedTuple):
    """Rows made ready for one database's bulk path (JSON text on SQLite)."""

    dialect: str
    rows: list


def prepare(dialect: str, table: sa.Table, columns: Sequence[str],
            rows: Sequence[tuple], key: str) -> Prepared:
    """Encode rows for :func:`insert_new` / :func:`copy_new` on ``dialect`` ("postgresql" or
    "sqlite").

    PostgreSQL takes the rows sorted by ``key`` (binary COPY dumps them as they are): every
    writer then takes the unique index's row locks in the same order, so two transactions whose
    batches share keys wait for each other instead of deadlocking (a cycle needs one of them to
    hold a key greater than the one it waits for). SQLite has one writer at a time and keeps the
    caller's order; it gets its JSON columns as text, built a column at a time (lists of plain
    strings without characters that JSON escapes are joined directly; anything else goes
    through the JSON encoder).
    """
    if dialect == "postgresql":
        return Prepared(dialect, sorted(rows, key=itemgetter(list(columns).index(key))))
    json_at = [i for i, name in enumerate(columns) if _is_json_on_sqlite(table.c[name])]
    if not json_at:
        return Prepared(dialect, list(rows))
    data = list(zip(*rows, strict=True))
    for i in json_at:
        data[i] = _json_column(list(data[i]))
    return Prepared(dialect, list(zip(*data, strict=True)))


_JSON_SPECIAL = re.compile(r'["\\\x00-\x1f]')
_JSON_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _json_column(values: list) -> list[str | None]:
    """One column of lists or documents as JSON text: lists of plain strings that need no
    escaping are joined directly, lists of finite floats written by ``repr`` (the digits the
    JSON encoder writes, ~30% faster); anything else goes through the JSON encoder."""
    present = [v for v in values if v is not None]
    if present and set(map(type, present)) == {list}:
        flat = list(chain.from_iterable(present))
        types = set(map(type, flat))
        if types == {str} and not _JSON_SPECIAL.search("".join(flat)):
            return [None if v is None else '["' + '","'.join(v) + '"]' for v in values]
        if types == {float} and math.isfinite(sum(flat)):
            return [None if v is None else repr(v) for v in values]
    return [None if v is None else _JSON_DUMPS(v) for v in values]


# unique violation; deadlock (two COPYs holding ids the other one needs: the rolled back
# transaction releases ours, and the staged insert waits for the other writer instead)
_RETRY_STAGED = ("23505", "40P01")


class KeysTaken(Exception):
    """A direct COPY met a key that is stored already (or that a concurrent writer's COPY holds):
    its transaction is aborted; insert the rows with :func:`insert_new` in a new one."""


def copy_new(conn: sa.Connection, table: sa.Table, columns: Sequence[str],
             prepared: Prepared) -> None:
    """PostgreSQL: COPY the rows straight into the table, betting that none of their keys is
    stored yet (fresh logs, the common case); all of them are inserted, or :class:`KeysTaken`
    is raised and the transaction must be rolled back. The rows come from :func:`prepare`
    (sorted by key, so that overlapping COPYs wait for each other rather than deadlock).

    For a transaction that holds nothing else (the caller retries in a new one). No look-up
    first, and no savepoint: probing 10,000 keys costs ~2 us each, and a COPY inside a savepoint
    runs ~15% slower (measured), on every batch.
    """
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:
        try:
            _copy_rows(cur, table, columns, table.name, prepared.rows)
        except Exception as error:  # the driver's UniqueViolation, or a deadlock with another
            if getattr(error, "sqlstate", None) in _RETRY_STAGED:  # writer's COPY
                raise KeysTaken(str(error).splitlines()[0]) from error
            raise


def insert_rows(conn: sa.Connection, table: sa.Table, columns: Sequence[str],
                rows: Sequence[tuple]) -> None:
    """Insert ``rows`` (tuples in the order of ``columns``, none stored yet) at the driver's
    speed: a binary ``COPY`` on PostgreSQL, ``executemany`` on SQLite (the rollup's
    per-user state: a first day writes hundreds of thousands of rows, which SQLAlchemy's
    per-row parameter handling made take seconds)."""
    if not rows:
        return
    raw = conn.connection.driver_connection
    if conn.dialect.name == "postgresql":
        with raw.cursor() as cur:
            _copy_rows(cur, table, columns, table.name, rows)
        return
    dates = [i for i, name in enumerate(columns) if isinstance(table.c[name].type, sa.Date)]
    if dates:  # stored as SQLAlchemy's SQLite dialect stores them: ISO text
        data = list(zip(*rows, strict=True))
        for i in dates:
            data[i] = [None if v is None else v.isoformat() for v in data[i]]
        rows = list(zip(*data, strict=True))
    cur = raw.cursor()
    try:
        cur.executemany(f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES "
                        f"({', '.join('?' * len(columns))})", rows)
    finally:
        cur.close()


def insert_dicts(conn: sa.Connection, table: sa.Table, rows: Sequence[dict]) -> None:
    """:func:`insert_rows` for rows given as dicts, every one with the first one's keys:
    SQLAlchemy's ``executemany`` of an ``insert()`` builds each row's parameters in Python
    (~25 us a row; a night's statistics rows are tens of thousands)."""
    if not rows:
        return
    columns = list(rows[0])
    keys = rows[0].keys()
    for row in rows:
        if row.keys() != keys:
            raise ValueError(f"rows for {table.name} do not all have the columns {columns}: "
                             f"one has {sorted(row)}")
    pick = itemgetter(*columns)
    insert_rows(conn, table, columns, [pick(row) if len(columns) > 1 else (pick(row),)
                                       for row in rows])


def _copy_rows(cur, table: sa.Table, columns: Sequence[str], target: str, rows) -> None:
    types = [_pg_type(table.c[name]) for name in columns]
    with cur.copy(f"COPY {target} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(types)
        write_row = copy.write_row
        for row in rows:
            write_row(row)


def _insert_new_postgresql(conn, table, columns, key, rows, prepared) -> list[str]:
    # COPY into a session-local staging table, then insert what is new.
    col_list = ", ".join(columns)
    stage = f"tracker_stage_{table.name}"
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:
        cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS "
                    f"SELECT {col_list} FROM {table.name} WITH NO DATA")
        _copy_rows(cur, table, columns, stage, prepared)
        # in key order, whatever the order staged: the locks of the unique index are taken in
        # the same order by every writer (see prepare)
        cur.execute(f"INSERT INTO {table.name} ({col_list}) SELECT {col_list} FROM {stage} "
                    f"ORDER BY {key} ON CONFLICT ({key}) DO NOTHING RETURNING {key}")
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
