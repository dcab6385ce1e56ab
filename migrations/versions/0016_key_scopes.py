"""API keys scoped to experiments: ``api_key_experiment`` lists the experiments a key may
write to (scope ``ingest``) or read (scope ``read``); a key with no row there reaches every
experiment, as every key did before.

The experiment is named by its key, not by a foreign key to ``experiment``: deleting an
experiment must not widen a key scoped to it alone to every experiment (its last row gone),
and a key may be scoped to an experiment created later under the same key. Deleting an API
key deletes its rows.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

KEY_LENGTH = 200  # as tracker.store.base.KEY_LENGTH when this revision was written


def upgrade() -> None:
    op.create_table(
        "api_key_experiment",
        sa.Column("api_key_id", sa.Integer(), nullable=False),
        sa.Column("experiment", sa.String(length=KEY_LENGTH), nullable=False),
        sa.ForeignKeyConstraint(["api_key_id"], ["api_key.id"], ondelete="CASCADE",
                                name=op.f("fk_api_key_experiment_api_key_id_api_key")),
        sa.PrimaryKeyConstraint("api_key_id", "experiment", name=op.f("pk_api_key_experiment")),
    )


def downgrade() -> None:
    op.drop_table("api_key_experiment")
