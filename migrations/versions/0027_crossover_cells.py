"""The cumulative view's crossover cells (intent-to-treat): computed again once.

From this revision the cumulative view also holds, per arm, the crossover users whose first
exposure was in it (``segment = '(crossover)'`` in ``rollup_metric`` and
``rollup_covariate_sums``; their rows in the checkpoint's per-user state), which the report
adds to the arm's own users for its intent-to-treat estimate.

Upgrade: every checkpoint's stored sums are forgotten (``sums`` NULL), so the next rollup of
each experiment computes its cumulative view again from the first day, once, writing the
crossover cells of every day (where expired logs forbid it, from the checkpoint on);
nothing else changes. Downgrade: the crossover rows are deleted (the release before neither
reads nor maintains them) and the sums forgotten likewise (they hold the crossover cells).

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

CROSSOVER = "(crossover)"


def upgrade() -> None:
    op.execute(sa.text("UPDATE rollup_checkpoint SET sums = NULL"))


def downgrade() -> None:
    for table in ("rollup_metric", "rollup_covariate_sums"):
        op.execute(sa.text(f"DELETE FROM {table} WHERE segment = :crossover").bindparams(
            crossover=CROSSOVER))
    op.execute(sa.text("UPDATE rollup_checkpoint SET sums = NULL"))
