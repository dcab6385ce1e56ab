"""Rollup tables: incremental state, per-day status, unit-day outcomes, item exposure (daily
and cumulative), arm-day sufficient statistics and health; an index on interaction time.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None



def _key(*columns: str) -> list[sa.Column]:
    types = {"experiment_id": sa.Integer(), "day": sa.Date(), "cumulative": sa.Boolean(),
             "arm_id": sa.Integer(), "user_id": sa.String(256), "item_id": sa.String(256),
             "metric": sa.String(64), "k": sa.Integer()}
    return [sa.Column(name, types[name], nullable=False, autoincrement=False)
            for name in columns]


def upgrade() -> None:
    op.create_table(
        "rollup_state",
        *_key("experiment_id"),
        sa.Column("impressions_seen", sa.BigInteger(), nullable=False),
        sa.Column("interactions_seen", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", name=op.f("pk_rollup_state")),
    )
    op.create_table(
        "rollup_day",
        *_key("experiment_id", "day"),
        sa.Column("impressions", sa.BigInteger(), nullable=False),
        sa.Column("users", sa.BigInteger(), nullable=False),
        sa.Column("closes_at", sa.BigInteger(), nullable=False),
        sa.Column("computed_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", name=op.f("pk_rollup_day")),
    )
    op.create_table(
        "rollup_user_day",
        *_key("experiment_id", "day", "user_id", "arm_id"),
        sa.Column("impressions", sa.Integer(), nullable=False),
        sa.Column("sums", sa.LargeBinary(), nullable=False),
        sa.Column("counts", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", "user_id", "arm_id",
                                name=op.f("pk_rollup_user_day")),
    )
    op.create_table(
        "rollup_exposure",
        *_key("experiment_id", "day", "cumulative", "arm_id"),
        sa.Column("items", sa.Text(), nullable=False),
        sa.Column("counts", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", "cumulative", "arm_id",
                                name=op.f("pk_rollup_exposure")),
    )
    op.create_table(
        "rollup_metric",
        *_key("experiment_id", "day", "cumulative", "arm_id", "metric", "k"),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("users", sa.BigInteger(), nullable=False),
        *[sa.Column(name, sa.Double(), nullable=False)
          for name in ("sum", "sum_sq", "impressions", "impressions_sq", "ratio_sum",
                       "ratio_sum_sq", "ratio_cross")],
        sa.Column("provisional", sa.Boolean(), nullable=False),
        sa.CheckConstraint("kind IN ('user', 'set')", name=op.f("ck_rollup_metric_kind")),
        sa.PrimaryKeyConstraint("experiment_id", "day", "cumulative", "arm_id", "metric", "k",
                                name=op.f("pk_rollup_metric")),
    )
    op.create_table(
        "rollup_health",
        *_key("experiment_id", "day", "cumulative", "arm_id"),
        sa.Column("users", sa.BigInteger(), nullable=False),
        sa.Column("impressions", sa.BigInteger(), nullable=False),
        sa.Column("crossover_users", sa.BigInteger(), nullable=False),
        sa.Column("provisional", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", "cumulative", "arm_id",
                                name=op.f("pk_rollup_health")),
    )
    op.create_index(op.f("ix_interaction_occurred_at"), "interaction", ["occurred_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_interaction_occurred_at"), table_name="interaction")
    for table in ("rollup_health", "rollup_metric", "rollup_exposure", "rollup_user_day",
                  "rollup_day", "rollup_state"):
        op.drop_table(table)
