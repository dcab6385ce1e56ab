"""The tables the report reads name a cell by its arm and its slice.

``rollup_metric``, ``rollup_health``, ``rollup_exposure``, ``rollup_exposure_day`` and
``rollup_covariate_sums`` get two key columns beside ``arm_id``: ``segment``, the declared
dimension a row is sliced by, and ``slice``, its value (both ``''``: the whole arm, which is
what every stored row was before this revision). Their primary keys take both, so a
dimension's rows can stand beside the arm's.

``rollup_slice_count`` holds, per day, the lists per value of each declared list dimension,
and ``rollup_state.levels`` the values the stored results keep as slices (the most
frequent; the others fold into ``(other)``).

The downgrade deletes the sliced rows and the counts (derived data: the release before has
no place for them) and restores the primary keys. A rebuild is asked of every experiment
with levels (its per-user state holds the slices' cells, which the release before would
take for arms).

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

KEYS = {
    "rollup_metric": ("experiment_id", "day", "cumulative", "arm_id", "metric", "k"),
    "rollup_health": ("experiment_id", "day", "cumulative", "arm_id"),
    "rollup_exposure": ("experiment_id", "day", "cumulative", "arm_id"),
    "rollup_exposure_day": ("experiment_id", "day", "exposure_day", "arm_id", "metric", "k"),
    "rollup_covariate_sums": ("experiment_id", "day", "cumulative", "arm_id", "metric", "k"),
}
"""Each table's primary key before this revision; the slice's columns follow ``arm_id``."""


def _sliced(keys: tuple[str, ...]) -> list[str]:
    at = keys.index("arm_id") + 1
    return [*keys[:at], "segment", "slice", *keys[at:]]


def upgrade() -> None:
    op.create_table(
        "rollup_slice_count",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("segment", sa.String(64), nullable=False),
        sa.Column("slice", sa.Text(), nullable=False),
        sa.Column("lists", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", "segment", "slice",
                                name=op.f("pk_rollup_slice_count")),
    )
    with op.batch_alter_table("rollup_state") as batch:
        batch.add_column(sa.Column("levels", sa.Text(), nullable=True))
    for table, keys in KEYS.items():
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("segment", sa.String(64), nullable=False,
                                       server_default=""))
            batch.add_column(sa.Column("slice", sa.Text(), nullable=False, server_default=""))
            batch.drop_constraint(f"pk_{table}", type_="primary")
            batch.create_primary_key(f"pk_{table}", _sliced(keys))


def downgrade() -> None:
    # per-user state with slices' cells: forgotten, and every day recomputed by the next run
    op.execute(sa.text("UPDATE rollup_state SET impressions_seen = NULL, "
                       "interactions_seen = NULL WHERE levels IS NOT NULL"))
    with op.batch_alter_table("rollup_state") as batch:
        batch.drop_column("levels")
    op.drop_table("rollup_slice_count")
    for table, keys in KEYS.items():
        op.execute(sa.text(f"DELETE FROM {table} WHERE segment <> '' OR slice <> ''"))
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f"pk_{table}", type_="primary")
            batch.create_primary_key(f"pk_{table}", list(keys))
            batch.drop_column("slice")
            batch.drop_column("segment")
