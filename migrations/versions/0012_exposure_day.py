"""The ``exposure_day`` view: metrics by days since each user's first exposure.

Two new derived tables: ``rollup_first_seen`` (per experiment and day, the users first seen
that day, an Arrow IPC stream ``first_seen/1``) and ``rollup_exposure_day`` (one calendar
day's per-user sufficient statistics split by days since the users' first exposure). Nothing
is invalidated: the next ``tracker rollup`` finds no ``rollup_first_seen`` rows for the days
already rolled up and builds both tables from the stored daily unit rows
(:mod:`tracker.rollup.exposure_days`). The downgrade drops them (derived data only).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_STATS = ("sum", "sum_sq", "impressions", "impressions_sq", "ratio_sum", "ratio_sum_sq",
          "ratio_cross")


def upgrade() -> None:
    op.create_table(
        "rollup_first_seen",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", name=op.f("pk_rollup_first_seen")),
    )
    op.create_table(
        "rollup_exposure_day",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("exposure_day", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("arm_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("users", sa.BigInteger(), nullable=False),
        *(sa.Column(name, sa.Double(), nullable=False) for name in _STATS),
        sa.Column("provisional", sa.Boolean(), nullable=False),
        sa.CheckConstraint("exposure_day >= 0",
                           name=op.f("ck_rollup_exposure_day_exposure_day_not_negative")),
        sa.PrimaryKeyConstraint("experiment_id", "day", "exposure_day", "arm_id", "metric", "k",
                                name=op.f("pk_rollup_exposure_day")),
    )


def downgrade() -> None:
    op.drop_table("rollup_exposure_day")
    op.drop_table("rollup_first_seen")
