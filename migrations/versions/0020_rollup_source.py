"""The source of an experiment's rolled-up results: ``rollup_state.source``.

``database`` when the default engine computed them from the database's logs (its watermarks,
``impressions_seen`` and ``interactions_seen``, say how far), ``spark:<state directory>``
when the Spark engine computed them from a lake (its watermark is that directory's
manifest), NULL when unknown. A run of one source goes on from its own watermark only; a
run of another takes the experiment over by rebuilding it (:mod:`tracker.rollup.sources`).

Upgrade: the rows whose watermarks are set were left by the default engine (a Spark run
reset them), so they are ``database``; the others stay NULL, and their next run rebuilds
as it did. Downgrade drops the column: a Spark-owned experiment's watermarks are already
NULL (Spark sets them so), so the release before rebuilds it from the database, as it did.
It also writes the stored per-user state of this release's formats back in the formats the
release before reads (``units/2`` and ``provisional-lists/2`` name the cell ``cell``, their
``/1`` forms ``arm_id``, with the same values), bit for bit in every other column, so that
release goes on incrementally: days past a retention horizon could not be recomputed.
Upgrade needs no rewrite: this release reads the ``/1`` forms.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29
"""

from __future__ import annotations

import pyarrow as pa
import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rollup_state") as batch:
        batch.add_column(sa.Column("source", sa.Text(), nullable=True))
    op.execute(sa.text("UPDATE rollup_state SET source = 'database' "
                       "WHERE impressions_seen IS NOT NULL AND interactions_seen IS NOT NULL"))


FORMAT = b"tracker.format"
EARLIER = {b"units/2": b"units/1", b"provisional-lists/2": b"provisional-lists/1"}
STATE = {"rollup_units": ("experiment_id", "day", "cumulative", "part"),
         "rollup_provisional": ("experiment_id", "day", "part")}


def _earlier(data: bytes) -> bytes | None:
    """One stored stream in the format the release before reads (None: no change)."""
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(data))
    except (pa.ArrowInvalid, OSError):
        return None
    metadata = reader.schema.metadata or {}
    found = metadata.get(FORMAT)
    if found not in EARLIER:
        return None
    table = reader.read_all()
    table = table.rename_columns(["arm_id" if n == "cell" else n for n in table.column_names])
    table = table.replace_schema_metadata({**metadata, FORMAT: EARLIER[found]})
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")  # as this release wrote them
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def downgrade() -> None:
    conn = op.get_bind()
    for table, keys in STATE.items():
        rows = conn.execute(sa.text(f"SELECT {', '.join(keys)}, data FROM {table}")).all()
        for *key, data in rows:
            earlier = _earlier(bytes(data))
            if earlier is not None:
                conn.execute(sa.text(f"UPDATE {table} SET data = :data WHERE "
                                     + " AND ".join(f"{k} = :{k}" for k in keys)),
                             dict(zip(keys, key, strict=True), data=earlier))
    op.execute(sa.text("UPDATE rollup_state SET impressions_seen = NULL, "
                       "interactions_seen = NULL WHERE source IS NULL OR source <> 'database'"))
    if op.get_bind().dialect.name == "sqlite":
        op.execute(sa.text("ALTER TABLE rollup_state DROP COLUMN source"))
    else:
        op.drop_column("rollup_state", "source")
