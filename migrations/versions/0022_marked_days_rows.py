"""A day an erasure marked for recompute keeps no per-user rows.

From this release a rolled-up day whose windows closed since it was computed, and that
nothing new touches, is final as it stands: the rollup publishes it from its stored
per-user rows (``rollup_units``, ``rollup_exposure``) without reading the logs. An erasure
now deletes the rows of the days it marks at once, so that a marked day is recomputed from
the logs instead. Days marked by the release before still hold them (and the erased user):
upgrade deletes the daily rows and a provisional day's kept state (``rollup_provisional``)
of every marked day, recognised by the mark's signature (``computed_at`` one microsecond
before ``closes_at``), so that the next run recomputes them from the logs, as the release
before would have. Downgrade changes nothing: that release recomputes a due day without
kept state from the logs.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_MARKED = ("SELECT d.experiment_id, d.day FROM rollup_day d WHERE d.computed_at = "
           "d.closes_at - 1")


def upgrade() -> None:
    for table, daily in (("rollup_units", "cumulative = false AND "),
                         ("rollup_exposure", "cumulative = false AND "),
                         ("rollup_provisional", "")):
        op.execute(sa.text(
            f"DELETE FROM {table} WHERE {daily}EXISTS ({_MARKED} AND "
            f"d.experiment_id = {table}.experiment_id AND d.day = {table}.day)"))


def downgrade() -> None:
    """Nothing to undo: the release before recomputes a due day without kept state from
    the logs, which is what the rows deleted on upgrade left to do."""
