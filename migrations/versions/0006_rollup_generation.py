"""The rollup state's generation: a catalog declaration racing a rollup is never lost.

``rollup_state.generation`` counts the declarations that reset the experiment's rollup; a
declaration now keeps the row (watermarks NULL: "recompute every day") and bumps it, and a
run records its watermarks only while the generation is the one it started from. The
watermarks and ``updated_at`` become nullable (NULL: no complete run since the reset).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_WATERMARKS = ("impressions_seen", "interactions_seen", "updated_at")


def upgrade() -> None:
    with op.batch_alter_table("rollup_state") as batch:
        batch.add_column(sa.Column("generation", sa.BigInteger(), nullable=False,
                                   server_default="0"))
        for column in _WATERMARKS:
            batch.alter_column(column, existing_type=sa.BigInteger(), nullable=True)


def downgrade() -> None:
    # a reset row (watermarks NULL) meant what a missing row means before 0006: rebuild
    op.execute("DELETE FROM rollup_state WHERE impressions_seen IS NULL "
               "OR interactions_seen IS NULL OR updated_at IS NULL")
    with op.batch_alter_table("rollup_state") as batch:
        for column in _WATERMARKS:
            batch.alter_column(column, existing_type=sa.BigInteger(), nullable=False)
        batch.drop_column("generation")
