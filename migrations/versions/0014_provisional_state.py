"""``rollup_provisional``: a provisional day's encoded impressions and ground truth.

Kept while a day is provisional, so that when interactions of a later day answer its
impressions the rollup scores again only the users they change, from this state, instead of
reading and decoding the day again (:mod:`tracker.rollup.provisional`). Nothing to convert:
a day without a row is read from the raw logs as before (and gets its row if still
provisional). The downgrade drops the table (derived data only).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rollup_provisional",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", "part",
                                name=op.f("pk_rollup_provisional")),
    )


def downgrade() -> None:
    op.drop_table("rollup_provisional")
