"""API keys of the HTTP collector: stored only as hashes, one scope each, revocable.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

Self-contained on purpose: migrations never import the ORM models.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_key",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key_id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("revoked_at", sa.BigInteger(), nullable=True),
        sa.CheckConstraint("scope IN ('ingest', 'read')", name=op.f("ck_api_key_scope")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_key")),
        sa.UniqueConstraint("key_id", name=op.f("uq_api_key_key_id")),
    )


def downgrade() -> None:
    op.drop_table("api_key")
