"""The analysis plan pinned on an experiment, its history, and the stored summary per
experiment that the experiments list reads.

- ``experiment.plan``: a JSON document ``{"intervals": "fixed_horizon" | "sequential",
  "cuped": bool, "correction": "holm" | "bh", "target_effect": float}``; NULL means the
  defaults (fixed-horizon, CUPED on, Holm, 5 %), which are what every report used before this
  revision, so existing experiments read the same. The planned end is ``experiment.ends_at``.
- ``plan_change``: one row per change of the plan or the planned end (creation included):
  when, and the whole plan after the change.
- ``experiment_summary``: one row per experiment, written at the end of each rollup run: the
  decision per treatment arm, health and headline lift under the plan (the list page reads it
  instead of rebuilding a scorecard per experiment per load).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("experiment") as batch:
        batch.add_column(sa.Column("plan", JSON_DOC, nullable=True))
    op.create_table(
        "plan_change",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("changed_at", sa.BigInteger(), nullable=False),
        sa.Column("plan", JSON_DOC, nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiment.id"], ondelete="CASCADE",
                                name="fk_plan_change_experiment_id_experiment"),
        sa.PrimaryKeyConstraint("id", name="pk_plan_change"),
    )
    op.create_index("ix_plan_change_experiment_id", "plan_change", ["experiment_id"])
    op.create_table(
        "experiment_summary",
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("written_at", sa.BigInteger(), nullable=False),
        sa.Column("summary", JSON_DOC, nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiment.id"], ondelete="CASCADE",
                                name="fk_experiment_summary_experiment_id_experiment"),
        sa.PrimaryKeyConstraint("experiment_id", name="pk_experiment_summary"),
    )


def downgrade() -> None:
    op.drop_table("experiment_summary")
    op.drop_index("ix_plan_change_experiment_id", table_name="plan_change")
    op.drop_table("plan_change")
    if op.get_bind().dialect.name == "sqlite":
        # native since SQLite 3.35: a batch copy would drop ``experiment``, and with foreign
        # keys on that deletes its arms and catalog (ON DELETE CASCADE)
        op.execute(sa.text("ALTER TABLE experiment DROP COLUMN plan"))
    else:
        op.drop_column("experiment", "plan")
