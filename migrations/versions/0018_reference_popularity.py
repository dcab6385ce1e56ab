"""Item popularity (surprisal) over a reference period fixed at the experiment's start: one
``rollup_popularity`` row per experiment (format ``popularity/3`` of
:mod:`tracker.rollup.state`: the ``window_days`` days before ``day``, the experiment's first
day, every user's interactions), where there was one per day over the window before it,
counted from the per-day ``rollup_pairs``, which go.

Upgrade: drop ``rollup_pairs`` and empty ``rollup_popularity``. The next ``tracker rollup``
finds no popularity, counts it from the logs and, since it differs from none, recomputes
every day it may (days before a retention horizon keep their results); the watermarks stay,
so an experiment whose logs expired is not refused a rebuild. The results the report reads
stay until that run replaces them.

Downgrade: ``rollup_pairs`` back (empty, compressed as 0015 set it), ``rollup_popularity``
emptied and the watermarks set to NULL: the code of that revision recomputes every day under
its own rule.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("rollup_pairs")
    op.execute(sa.text("DELETE FROM rollup_popularity"))


def downgrade() -> None:
    op.create_table(
        "rollup_pairs",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", name=op.f("pk_rollup_pairs")),
    )
    bind = op.get_bind()
    if bind.dialect.name == "postgresql" and "lz4" in (bind.execute(sa.text(
            "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"))
            .scalar() or []):
        op.execute(sa.text("ALTER TABLE rollup_pairs ALTER COLUMN data SET COMPRESSION lz4"))
    op.execute(sa.text("DELETE FROM rollup_popularity"))
    op.execute(sa.text("UPDATE rollup_state SET impressions_seen = NULL, "
                       "interactions_seen = NULL"))
