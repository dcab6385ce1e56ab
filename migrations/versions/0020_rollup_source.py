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

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rollup_state") as batch:
        batch.add_column(sa.Column("source", sa.String(length=1024), nullable=True))
    op.execute(sa.text("UPDATE rollup_state SET source = 'database' "
                       "WHERE impressions_seen IS NOT NULL AND interactions_seen IS NOT NULL"))


def downgrade() -> None:
    op.execute(sa.text("UPDATE rollup_state SET impressions_seen = NULL, "
                       "interactions_seen = NULL WHERE source IS NULL OR source <> 'database'"))
    if op.get_bind().dialect.name == "sqlite":
        op.execute(sa.text("ALTER TABLE rollup_state DROP COLUMN source"))
    else:
        op.drop_column("rollup_state", "source")
