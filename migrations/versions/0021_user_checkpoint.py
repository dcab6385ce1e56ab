"""Per-user state keyed by user: the cumulative checkpoint (``rollup_checkpoint``,
``rollup_user_totals``) and CUPED's covariates (``rollup_user_covariates``, one row per user).

The cumulative pass kept one checkpoint per experiment, every user's totals through the
newest final day, as one ``units/2`` stream in ``rollup_units`` (``cumulative`` true): each
run read and rewrote all of it, so the nightly cost grew with the users seen. Now each
user's totals are a row of ``rollup_user_totals`` (a run reads and writes only the users its
days hold), and ``rollup_checkpoint`` names the day, the layout columns, and the cumulative
view's exact sums on that day (which the pass moves by the changed users' deltas).

Upgrade: the newest cumulative stream of each experiment becomes its users' rows, bit for
bit, and its checkpoint row with the sums left NULL: the next run computes them once from
every user's rows (nothing is read from the logs, so days past a retention horizon keep
their base); the cumulative streams are dropped. ``columns`` names the rows' format and
layout: ``{"format": "user-totals/1", "columns": [...]}``. Downgrade: the users' rows become one
cumulative ``units/2`` stream again (every count written out), on the checkpoint's day, as
revision 0020 reads it; the new tables are dropped.

CUPED's covariates, one ``covariates/3`` stream per experiment, become one row per user
(``first_exposure`` and the covariates as little-endian float64), described in
``rollup_checkpoint.covariates`` (format ``covariates/4``, ``cuped_days``, the names, the
first exposures' bounds), bit for bit; downgrade writes the stream again.

Spelled out here, not imported: a migration describes its own revision's formats.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-29
"""

from __future__ import annotations

import json
import struct

import pyarrow as pa
import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

FORMAT = b"tracker.format"
UNITS = (b"units/1", b"units/2")
USER_TOTALS = "user-totals/1"
PART_ROWS_BYTES = 1 << 28  # sums per rollup_units part, as the release before splits them


def _record(columns: int) -> struct.Struct:
    """One (user, cell) row of ``user-totals/1``: cell, impressions (int64), then the sums
    and the counts of the columns (float64), little-endian."""
    return struct.Struct(f"<qq{2 * columns}d")


def upgrade() -> None:
    op.create_table(
        "rollup_checkpoint",
        sa.Column("experiment_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("day", sa.Date(), nullable=True),
        sa.Column("columns", sa.Text(), nullable=True),
        sa.Column("sums", sa.LargeBinary(), nullable=True),
        sa.Column("covariates", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("experiment_id", name=op.f("pk_rollup_checkpoint")),
    )
    op.create_table(
        "rollup_user_totals",
        sa.Column("experiment_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "user_id",
                                name=op.f("pk_rollup_user_totals")),
    )
    conn = op.get_bind()
    newest = conn.execute(sa.text(
        "SELECT experiment_id, max(day) FROM rollup_units WHERE cumulative = :t "
        "GROUP BY experiment_id"), {"t": True}).all()
    for experiment_id, day in newest:
        parts = conn.execute(sa.text(
            "SELECT data FROM rollup_units WHERE experiment_id = :e AND day = :d AND "
            "cumulative = :t ORDER BY part"), {"e": experiment_id, "d": day, "t": True}).all()
        table = _units([bytes(data) for (data,) in parts])
        if table is not None:
            _write_users(conn, experiment_id, day, table)
    conn.execute(sa.text("DELETE FROM rollup_units WHERE cumulative = :t"), {"t": True})
    _covariates_up(conn)


def _covariates_up(conn: sa.Connection) -> None:
    """``rollup_user_covariates``: one ``covariates/3`` stream per experiment becomes one
    row per user, described in ``rollup_checkpoint`` (another format is dropped: the next
    run computes every user's again)."""
    streams = conn.execute(sa.text(
        "SELECT experiment_id, data FROM rollup_user_covariates")).all()
    op.drop_table("rollup_user_covariates")
    op.create_table(
        "rollup_user_covariates",
        sa.Column("experiment_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("first_exposure", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "user_id",
                                name=op.f("pk_rollup_user_covariates")),
    )
    for experiment_id, data in streams:
        reader = pa.ipc.open_stream(pa.py_buffer(bytes(data)))
        meta = reader.schema.metadata or {}
        if meta.get(FORMAT) != b"covariates/3":
            continue
        table = reader.read_all()
        names = [n for n in table.column_names if n not in ("user_id", "first_exposure")]
        first = table["first_exposure"].to_pylist()
        columns = [table[n].to_pylist() for n in names]
        pack = struct.Struct(f"<{len(names)}d").pack
        rows = [{"e": experiment_id, "u": user, "f": first[i],
                 "data": pack(*(c[i] for c in columns))}
                for i, user in enumerate(table["user_id"].to_pylist())]
        for at in range(0, len(rows), 10_000):
            conn.execute(sa.text("INSERT INTO rollup_user_covariates (experiment_id, user_id, "
                                 "first_exposure, data) VALUES (:e, :u, :f, :data)"),
                         rows[at:at + 10_000])
        described = json.dumps({"format": "covariates/4", "names": names,
                                "cuped_days": int(meta[b"tracker.cuped_days"]),
                                "first": [min(first), max(first)] if first else None})
        if not conn.execute(sa.text("UPDATE rollup_checkpoint SET covariates = :c WHERE "
                                    "experiment_id = :e"),
                            {"c": described, "e": experiment_id}).rowcount:
            conn.execute(sa.text("INSERT INTO rollup_checkpoint (experiment_id, covariates) "
                                 "VALUES (:e, :c)"), {"e": experiment_id, "c": described})


def _covariates_down(conn: sa.Connection) -> None:
    """Each experiment's rows back into one ``covariates/3`` stream (zstd buffers)."""
    described = conn.execute(sa.text("SELECT experiment_id, covariates FROM rollup_checkpoint "
                                     "WHERE covariates IS NOT NULL")).all()
    streams = []
    for experiment_id, text in described:
        found = json.loads(text)
        names = found["names"]
        unpack = struct.Struct(f"<{len(names)}d").unpack
        rows = conn.execute(sa.text(
            "SELECT user_id, first_exposure, data FROM rollup_user_covariates WHERE "
            "experiment_id = :e"), {"e": experiment_id}).all()
        rows.sort()  # by code point, as the release before sorts its users
        values = [unpack(bytes(data)) for _, _, data in rows]
        data = {"user_id": pa.array([u for u, _, _ in rows], type=pa.string()),
                "first_exposure": pa.array([f for _, f, _ in rows], type=pa.int64())}
        data.update({n: pa.array([v[j] for v in values], type=pa.float64())
                     for j, n in enumerate(names)})
        table = pa.table(data).replace_schema_metadata(
            {FORMAT: b"covariates/3", b"tracker.cuped_days": str(found["cuped_days"]).encode()})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema,
                               options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
            writer.write_table(table)
        streams.append({"e": experiment_id, "data": sink.getvalue().to_pybytes()})
    op.drop_table("rollup_user_covariates")
    op.create_table(
        "rollup_user_covariates",
        sa.Column("experiment_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", name=op.f("pk_rollup_user_covariates")),
    )
    if conn.dialect.name == "postgresql" and "lz4" in (conn.execute(sa.text(
            "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"))
            .scalar() or []):  # as revision 0015 left it
        op.execute(sa.text("ALTER TABLE rollup_user_covariates ALTER COLUMN data "
                           "SET COMPRESSION lz4"))
    for row in streams:
        conn.execute(sa.text("INSERT INTO rollup_user_covariates (experiment_id, data) "
                             "VALUES (:e, :data)"), row)


def _units(parts: list[bytes]) -> pa.Table | None:
    """The stream's rows (None: another format, which the next run rebuilds from the daily
    rows instead)."""
    tables = []
    for data in parts:
        reader = pa.ipc.open_stream(pa.py_buffer(data))
        if (reader.schema.metadata or {}).get(FORMAT) not in UNITS:
            return None
        table = reader.read_all()
        table = table.rename_columns(["cell" if n == "arm_id" else n
                                      for n in table.column_names])
        for name in [n[len("sum:"):] for n in table.column_names if n.startswith("sum:")]:
            if f"count:{name}" not in table.column_names:  # absent: equal to impressions
                table = table.append_column(f"count:{name}",
                                            table["impressions"].cast(pa.float64()))
        tables.append(table)
    return pa.concat_tables(tables, promote_options="default") if tables else None


def _write_users(conn: sa.Connection, experiment_id: int, day, table: pa.Table) -> None:
    names = [n[len("sum:"):] for n in table.column_names if n.startswith("sum:")]
    table = table.sort_by([("user_id", "ascending"), ("cell", "ascending")])
    impressions = table["impressions"].to_pylist()
    sums = [table[f"sum:{name}"].to_pylist() for name in names]
    counts = [table[f"count:{name}"].to_pylist() for name in names]  # each part's, filled
    record, cells = _record(len(names)), table["cell"].to_pylist()
    users, rows = table["user_id"].to_pylist(), {}
    for i, user in enumerate(users):
        data = record.pack(cells[i], impressions[i], *(s[i] for s in sums),
                           *(c[i] for c in counts))
        rows[user] = rows.get(user, b"") + data
    values = [{"e": experiment_id, "u": user, "data": data} for user, data in rows.items()]
    for at in range(0, len(values), 10_000):
        conn.execute(sa.text("INSERT INTO rollup_user_totals (experiment_id, user_id, data) "
                             "VALUES (:e, :u, :data)"), values[at:at + 10_000])
    conn.execute(sa.text("INSERT INTO rollup_checkpoint (experiment_id, day, columns, sums) "
                         "VALUES (:e, :d, :c, NULL)"),
                 {"e": experiment_id, "d": day,
                  "c": json.dumps({"format": USER_TOTALS, "columns": names})})


def downgrade() -> None:
    conn = op.get_bind()
    _covariates_down(conn)
    # units a later release set aside for its next cumulative pass (``cumulative`` true: a
    # run stopped before its last transaction): the release before reads such rows as its
    # checkpoint, written below
    conn.execute(sa.text("DELETE FROM rollup_units WHERE cumulative = :t"), {"t": True})
    for experiment_id, day, columns in conn.execute(sa.text(
            "SELECT experiment_id, day, columns FROM rollup_checkpoint "
            "WHERE day IS NOT NULL")).all():
        described = json.loads(columns)
        if described.get("format") != USER_TOTALS:
            continue  # not a format this revision wrote: the release before rebuilds it
        names = described["columns"]
        record = _record(len(names))
        users, records = [], []
        for user, data in sorted(conn.execute(sa.text(  # by code point, as Arrow sorts
                "SELECT user_id, data FROM rollup_user_totals WHERE experiment_id = :e"),
                {"e": experiment_id}).all()):
            for row in record.iter_unpack(bytes(data)):
                users.append(user)
                records.append(row)
        per_part = max(1, PART_ROWS_BYTES // (8 * max(len(names), 1)))
        for part, at in enumerate(range(0, max(len(records), 1), per_part)):
            conn.execute(sa.text(
                "INSERT INTO rollup_units (experiment_id, day, cumulative, part, data) "
                "VALUES (:e, :d, :t, :p, :data)"),
                {"e": experiment_id, "d": day, "t": True, "p": part,
                 "data": _stream(users[at:at + per_part], records[at:at + per_part], names)})
    op.drop_table("rollup_user_totals")
    op.drop_table("rollup_checkpoint")


def _stream(users: list[str], records: list[tuple], names: list[str]) -> bytes:
    """A ``units/2`` stream, as revision 0020's release writes it (zstd buffers)."""
    columns = list(zip(*records, strict=True)) if records else [()] * (2 + 2 * len(names))
    data = {"user_id": pa.array(users, type=pa.string()),
            "cell": pa.array(columns[0], type=pa.int64()),
            "impressions": pa.array(columns[1], type=pa.int64())}
    for j, name in enumerate(names):
        data[f"sum:{name}"] = pa.array(columns[2 + j], type=pa.float64())
    for j, name in enumerate(names):
        data[f"count:{name}"] = pa.array(columns[2 + len(names) + j], type=pa.float64())
    table = pa.table(data).replace_schema_metadata({FORMAT: b"units/2"})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema,
                           options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()
