"""CUPED's pre-period metric covariates: an index on ``impression (user_id, served_at)``
(a user's lists in the window before their first exposure, in any experiment) and the
covariate state recomputed in its new formats.

``rollup_user_covariates`` moves to ``covariates/2`` (each user's ``pre:<metric column>``
and ``no_pre_lists`` beside the interaction covariates) and ``rollup_covariate_sums`` to
``covsums/2`` (the covariates ``pre_metric`` and ``no_pre_lists`` added). Both tables are
emptied and the watermarks set to NULL, so the next ``tracker rollup`` recomputes every day
and every user's covariates from the raw logs. The downgrade drops the index and does the
same for the older version (its formats ``covariates/1`` and ``covsums/1``): derived data
only, nothing logged is touched.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _invalidate() -> None:
    op.execute(sa.text("DELETE FROM rollup_user_covariates"))
    op.execute(sa.text("DELETE FROM rollup_covariate_sums"))
    op.execute(sa.text("UPDATE rollup_state SET impressions_seen = NULL, "
                       "interactions_seen = NULL"))


def upgrade() -> None:
    op.create_index(op.f("ix_impression_user_id_served_at"), "impression",
                    ["user_id", "served_at"])
    _invalidate()


def downgrade() -> None:
    op.drop_index(op.f("ix_impression_user_id_served_at"), table_name="impression")
    _invalidate()
