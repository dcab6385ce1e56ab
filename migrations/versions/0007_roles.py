"""Metric roles stored on the experiment: ``experiment.roles`` is a JSON document
``{"primary": ["ndcg@10", ...], "guardrails": {"song_clicks": 0.05, ...}}`` (metric names as
the registry writes them; a guardrail maps to the relative loss it tolerates). NULL means no
roles were declared: the report's defaults apply, as they did before this revision, so
existing experiments are unchanged.

Revision ID: 0007
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("experiment") as batch:
        batch.add_column(sa.Column("roles", JSON_DOC, nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # native since SQLite 3.35: a batch copy would drop ``experiment``, and with foreign
        # keys on that deletes its arms and catalog (ON DELETE CASCADE)
        op.execute(sa.text("ALTER TABLE experiment DROP COLUMN roles"))
    else:
        op.drop_column("experiment", "roles")
