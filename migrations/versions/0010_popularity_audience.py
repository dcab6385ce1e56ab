"""Item popularity (surprisal) counts the experiment's own audience: a day's stored
``rollup_pairs`` hold only the interactions of the users the experiment served that day,
where they held every interaction of the day (formats ``pairs/2`` and ``popularity/2`` of
:mod:`tracker.rollup.state`).

Stored popularity state is **invalidated**, not converted (the old pairs lack the
impressions needed to filter them), in both directions: ``rollup_pairs`` and
``rollup_popularity`` are emptied and every experiment's watermarks set to NULL, so the next
``tracker rollup`` recomputes every day (the surprisal of every day changes) under the rule
of the code that runs it. The results the report reads stay until that run replaces them.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _invalidate() -> None:
    for table in ("rollup_pairs", "rollup_popularity"):
        op.execute(sa.text(f"DELETE FROM {table}"))
    op.execute(sa.text("UPDATE rollup_state SET impressions_seen = NULL, "
                       "interactions_seen = NULL"))


def upgrade() -> None:
    _invalidate()


def downgrade() -> None:
    _invalidate()
