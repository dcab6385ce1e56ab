"""Log retention: ``log_expiry`` records each run of ``tracker logs expire`` (the cutoff
before which raw impressions and interactions were deleted, when, and how many rows). The
latest cutoff is the horizon before which the rollup never recomputes a day. A new, empty
table: existing data is unchanged; downgrading drops the record (the deleted logs stay
deleted, and a later ``rollup --full`` would then rebuild the expired days from what is
left: back up first).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "log_expiry",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("expired_before", sa.BigInteger(), nullable=False),
        sa.Column("ran_at", sa.BigInteger(), nullable=False),
        sa.Column("impressions", sa.BigInteger(), nullable=False),
        sa.Column("interactions", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_expiry")),
    )


def downgrade() -> None:
    op.drop_table("log_expiry")
