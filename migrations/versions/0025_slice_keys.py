"""The tables the report reads name a cell by its arm and its slice.

``rollup_metric``, ``rollup_health``, ``rollup_exposure``, ``rollup_exposure_day`` and
``rollup_covariate_sums`` get two key columns beside ``arm_id``: ``segment``, the declared
dimension a row is sliced by, and ``slice``, its value (both ``''``: the whole arm, which is
what every stored row was before this revision). Their primary keys take both, so a
dimension's rows can stand beside the arm's.

The downgrade deletes the sliced rows (derived data: the release before has no place for
them) and restores the primary keys.

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
    for table, keys in KEYS.items():
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("segment", sa.String(64), nullable=False,
                                       server_default=""))
            batch.add_column(sa.Column("slice", sa.Text(), nullable=False, server_default=""))
            batch.drop_constraint(f"pk_{table}", type_="primary")
            batch.create_primary_key(f"pk_{table}", _sliced(keys))


def downgrade() -> None:
    for table, keys in KEYS.items():
        op.execute(sa.text(f"DELETE FROM {table} WHERE segment <> '' OR slice <> ''"))
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f"pk_{table}", type_="primary")
            batch.create_primary_key(f"pk_{table}", list(keys))
            batch.drop_column("slice")
            batch.drop_column("segment")
