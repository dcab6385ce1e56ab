"""CUPED: the experiment setting ``cuped_days`` (the pre-exposure window, default 14 days; 0
turns the adjustment off) and the rollup's two covariate tables.

- ``rollup_user_covariates``: per experiment, one self-describing Arrow IPC stream
  (``covariates/1`` of :mod:`tracker.rollup.state`) with each user's pre-exposure
  covariates, fixed when the user is first seen;
- ``rollup_covariate_sums``: per experiment, day and view (daily, cumulative), one stream
  (``covsums/1``) with the per-arm, per-metric sums the regression adjustment reads
  (Σx, Σx·x, Σx·y, and for the ratio view Σx·(user sum), Σx·(impressions)).

Existing experiments get ``cuped_days = 14``; their watermarks are set to NULL so the next
``tracker rollup`` recomputes every day and fills the new tables. The downgrade drops both
tables and the column (their contents are derived from the raw logs).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _invalidate() -> None:
    op.execute(sa.text("UPDATE rollup_state SET impressions_seen = NULL, "
                       "interactions_seen = NULL"))


def upgrade() -> None:
    # a plain ADD COLUMN (SQLite takes one with a default in place, no table copy)
    op.add_column("experiment", sa.Column("cuped_days", sa.Integer(), nullable=False,
                                          server_default="14"))
    op.create_table(
        "rollup_user_covariates",
        sa.Column("experiment_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", name=op.f("pk_rollup_user_covariates")),
    )
    op.create_table(
        "rollup_covariate_sums",
        sa.Column("experiment_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("cumulative", sa.Boolean(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", "cumulative",
                                name=op.f("pk_rollup_covariate_sums")),
    )
    _invalidate()


def downgrade() -> None:
    op.drop_table("rollup_covariate_sums")
    op.drop_table("rollup_user_covariates")
    if op.get_bind().dialect.name == "sqlite":
        # native since SQLite 3.35: a batch copy would drop ``experiment``, and with foreign
        # keys on that deletes its arms and catalog (ON DELETE CASCADE)
        op.execute(sa.text("ALTER TABLE experiment DROP COLUMN cuped_days"))
    else:
        op.drop_column("experiment", "cuped_days")
    _invalidate()
