"""The declared item catalog of an experiment (``catalog_item``): coverage's catalog is these
items plus any item seen in the experiment's impressions and interactions.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "catalog_item",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("item_id", sa.String(length=256), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiment.id"], ondelete="CASCADE",
                                name=op.f("fk_catalog_item_experiment_id_experiment")),
        sa.PrimaryKeyConstraint("experiment_id", "item_id", name=op.f("pk_catalog_item")),
    )


def downgrade() -> None:
    op.drop_table("catalog_item")
