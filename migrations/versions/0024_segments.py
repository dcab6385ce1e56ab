"""``experiment.segments``: the dimensions an experiment's results are sliced by.

A JSON document, the declared dimensions in order: ``[{"name": str, "kind": "user" |
"list", "max_levels": int}]``; NULL means none, which is what every experiment had before
this revision. ``name`` is a built-in user dimension (``cohort``, ``activity``) or a key of
the impressions' ``context`` (:class:`tracker.store.experiments.Segment`).

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    # a plain ADD COLUMN on both databases: a batch copy of ``experiment`` on SQLite would
    # drop the table, and with foreign keys on that deletes its arms (ON DELETE CASCADE)
    op.add_column("experiment", sa.Column("segments", JSON_DOC, nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(sa.text("ALTER TABLE experiment DROP COLUMN segments"))  # SQLite 3.35+
    else:
        op.drop_column("experiment", "segments")
