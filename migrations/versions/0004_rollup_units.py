"""Rollup unit totals as one row per experiment, day and view (daily or cumulative), split in
parts of bounded size: the users of the day as a JSON array and their per-metric sums and
counts as float64 matrices, replacing one row per user and day. The cumulative row of a day
is the previous day's plus the day's, so a new day reads one row whatever the history. And
``rollup_pairs``: per experiment and (reporting) day, the distinct (item, user) pairs of the
interactions that occurred that day, from which item popularity over a window of days is the
union; and ``rollup_popularity``: that union for a day, kept until its window changes.

The rollup tables hold derived data only: both directions empty them (and the rollup state),
and the next ``tracker rollup`` rebuilds everything from the logs.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

DERIVED = ("rollup_health", "rollup_metric", "rollup_exposure", "rollup_day", "rollup_state")


def _forget_results() -> None:
    for table in DERIVED:
        op.execute(sa.text(f"DELETE FROM {table}"))


def upgrade() -> None:
    _forget_results()
    op.drop_table("rollup_user_day")
    op.create_table(
        "rollup_units",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("cumulative", sa.Boolean(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("users", sa.Text(), nullable=False),
        sa.Column("arms", sa.LargeBinary(), nullable=False),
        sa.Column("impressions", sa.LargeBinary(), nullable=False),
        sa.Column("sums", sa.LargeBinary(), nullable=False),
        sa.Column("counts", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", "cumulative", "part",
                                name=op.f("pk_rollup_units")),
    )
    op.create_table(
        "rollup_pairs",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("items", sa.Text(), nullable=False),
        sa.Column("users", sa.Text(), nullable=False),
        sa.Column("pairs", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", name=op.f("pk_rollup_pairs")),
    )
    op.create_table(
        "rollup_popularity",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("window_days", sa.Integer(), nullable=False),
        sa.Column("items", sa.Text(), nullable=False),
        sa.Column("users", sa.LargeBinary(), nullable=False),
        sa.Column("n_users", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", name=op.f("pk_rollup_popularity")),
    )
    if op.get_bind().dialect.name == "postgresql":
        # float matrices barely compress: skip TOAST's compression attempt (2-4x slower
        # writes), store them out of line as they are
        for column in ("users", "arms", "impressions", "sums", "counts"):
            op.execute(sa.text(f"ALTER TABLE rollup_units ALTER COLUMN {column} "
                               "SET STORAGE EXTERNAL"))


def downgrade() -> None:
    _forget_results()
    op.drop_table("rollup_popularity")
    op.drop_table("rollup_pairs")
    op.drop_table("rollup_units")
    op.create_table(
        "rollup_user_day",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("arm_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("impressions", sa.Integer(), nullable=False),
        sa.Column("sums", sa.LargeBinary(), nullable=False),
        sa.Column("counts", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", "user_id", "arm_id",
                                name=op.f("pk_rollup_user_day")),
    )
