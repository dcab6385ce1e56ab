"""``rollup_popularity.pairs``: the distinct (item, user) pairs of a popularity's window with
the last day each occurred (``window-pairs/1``), kept on the experiment's newest computed
popularity only.

The next day's popularity is then that state advanced by the days entering its window (pairs
last seen before the window are dropped) instead of a union of every stored day's pairs
(:mod:`tracker.rollup.popularity`). Nothing to convert: a popularity without it is computed
from the union as before, which stores it. The downgrade drops the column (derived data
only).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rollup_popularity") as batch:
        batch.add_column(sa.Column("pairs", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rollup_popularity") as batch:
        batch.drop_column("pairs")
