"""CUPED's covariate sums as rows: ``rollup_covariate_sums`` holds one row per (experiment,
day, view, arm, metric, k) with a column per sum, as ``rollup_metric`` holds the other
sufficient statistics, where it held one Arrow stream (``covsums/2``) per day and view.

Upgrade: every stored stream becomes its rows (values unchanged, bit for bit); a stream of
another format, which no reader of this revision or the last read, is dropped. Downgrade:
the rows of each day and view become one ``covsums/2`` stream again, as revision 0018
writes it. Nothing is recomputed either way and the watermarks stay.

The columns are spelled out here, not imported: a migration describes the schema of its own
revision, whatever the code becomes.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-29
"""

from __future__ import annotations

import pyarrow as pa
import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

COVARIATES = ("pre_interactions", "pre_graded", "no_pre_period", "pre_metric", "no_pre_lists")
FORMAT = b"covsums/2"
KEYS = ("experiment_id", "day", "cumulative", "arm_id", "metric", "k")


def _names() -> list[tuple[str, str]]:
    """(stream column, SQL column) of every sum, in the order ``covsums/2`` writes them."""
    pairs = [(a, b) for i, a in enumerate(COVARIATES) for b in COVARIATES[i:]]
    names = [f"x:{c}" for c in COVARIATES] + [f"xx:{a}*{b}" for a, b in pairs]
    for prefix in ("xy", "xs", "xm"):
        names += [f"{prefix}:{c}" for c in COVARIATES]
    return [(name, name.replace(":", "_").replace("*", "__")) for name in names]


def _streams_table() -> None:
    """The table of revision 0018, its ``data`` compressed with lz4 as 0015 set it where the
    server offers lz4."""
    op.create_table(
        "rollup_covariate_sums",
        sa.Column("experiment_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("cumulative", sa.Boolean(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", "cumulative",
                                name=op.f("pk_rollup_covariate_sums")),
    )
    bind = op.get_bind()
    if bind.dialect.name == "postgresql" and "lz4" in (bind.execute(sa.text(
            "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"))
            .scalar() or []):
        op.execute(sa.text("ALTER TABLE rollup_covariate_sums ALTER COLUMN data "
                           "SET COMPRESSION lz4"))


def _rows_table() -> sa.Table:
    return op.create_table(
        "rollup_covariate_sums",
        sa.Column("experiment_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("cumulative", sa.Boolean(), nullable=False),
        sa.Column("arm_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("k", sa.Integer(), autoincrement=False, nullable=False),
        *[sa.Column(column, sa.Double(), nullable=False) for _, column in _names()],
        sa.PrimaryKeyConstraint(*KEYS, name=op.f("pk_rollup_covariate_sums")),
    )


def _rows_of(experiment_id: int, day, cumulative: bool, data: bytes) -> list[dict]:
    """The rows of one stored stream (none for a stream of another format)."""
    try:
        table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    except (pa.ArrowInvalid, OSError):
        return []
    meta = table.schema.metadata or {}
    if meta.get(b"tracker.format") != FORMAT or \
            meta.get(b"tracker.covariates", b"").decode().split(",") != list(COVARIATES):
        return []
    columns = {"arm_id": table["arm_id"].to_pylist(), "metric": table["metric"].to_pylist(),
               "k": table["k"].to_pylist()}
    columns.update({sql: table[name].to_pylist() for name, sql in _names()})
    return [dict(zip(columns, values, strict=True), experiment_id=experiment_id, day=day,
                 cumulative=cumulative) for values in zip(*columns.values(), strict=True)]


def _key_columns() -> list[sa.ColumnClause]:
    return [sa.column("experiment_id", sa.Integer()), sa.column("day", sa.Date()),
            sa.column("cumulative", sa.Boolean())]


def upgrade() -> None:
    bind = op.get_bind()
    streams = sa.table("rollup_covariate_sums", *_key_columns(),
                       sa.column("data", sa.LargeBinary()))
    stored = bind.execute(sa.select(streams)).all()
    rows = [row for stored_row in stored for row in _rows_of(*stored_row)]
    op.drop_table("rollup_covariate_sums")
    table = _rows_table()
    if rows:
        bind.execute(sa.insert(table), rows)


def _stream(rows: list, cuped_days: int) -> bytes:
    """``covsums/2``: the rows of one day and view as revision 0018 writes them."""
    data = {"arm_id": pa.array([r.arm_id for r in rows], type=pa.int64()),
            "metric": pa.array([r.metric for r in rows], type=pa.string()),
            "k": pa.array([r.k for r in rows], type=pa.int64())}
    data.update({name: pa.array([getattr(r, sql) for r in rows], type=pa.float64())
                 for name, sql in _names()})
    table = pa.table(data).replace_schema_metadata({
        b"tracker.format": FORMAT, b"tracker.covariates": ",".join(COVARIATES).encode(),
        b"tracker.cuped_days": str(cuped_days).encode()})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def downgrade() -> None:
    bind = op.get_bind()
    sums = sa.table("rollup_covariate_sums", *_key_columns(),
                    sa.column("arm_id", sa.Integer()), sa.column("metric", sa.String()),
                    sa.column("k", sa.Integer()),
                    *[sa.column(sql, sa.Double()) for _, sql in _names()])
    experiment = sa.table("experiment", sa.column("id", sa.Integer()),
                          sa.column("cuped_days", sa.Integer()))
    stored = bind.execute(
        sa.select(sums, experiment.c.cuped_days)
        .join(experiment, experiment.c.id == sums.c.experiment_id)
        .order_by(*[sums.c[k] for k in KEYS])).all()
    groups: dict[tuple, list] = {}
    for row in stored:
        groups.setdefault((row.experiment_id, row.day, row.cumulative), []).append(row)
    op.drop_table("rollup_covariate_sums")
    _streams_table()
    table = sa.table("rollup_covariate_sums", *_key_columns(),
                     sa.column("data", sa.LargeBinary()))
    values = [{"experiment_id": e, "day": d, "cumulative": c,
               "data": _stream(rows, rows[0].cuped_days)}
              for (e, d, c), rows in groups.items()]
    if values:
        bind.execute(sa.insert(table), values)
