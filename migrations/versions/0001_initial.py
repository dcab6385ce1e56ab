"""Initial schema: experiments, arms, impressions (served lists), interactions.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Self-contained on purpose: migrations never import the ORM models, so later model changes
cannot rewrite history.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ITEM_LIST = sa.JSON().with_variant(postgresql.ARRAY(sa.Text()), "postgresql")
SCORE_LIST = sa.JSON().with_variant(postgresql.ARRAY(sa.Double()), "postgresql")
JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "experiment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("starts_at", sa.BigInteger(), nullable=True),
        sa.Column("ends_at", sa.BigInteger(), nullable=True),
        sa.Column("control_arm", sa.String(200), nullable=False),
        sa.Column("attribution_window_us", sa.BigInteger(), nullable=False),
        sa.Column("relevance", JSON_DOC, nullable=True),
        sa.Column("unknown_events", sa.String(16), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("cutoffs", JSON_DOC, nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("status IN ('draft', 'running', 'stopped', 'archived')",
                           name=op.f("ck_experiment_status")),
        sa.CheckConstraint("unknown_events IN ('reject', 'zero')",
                           name=op.f("ck_experiment_unknown_events")),
        sa.CheckConstraint("attribution_window_us > 0",
                           name=op.f("ck_experiment_attribution_window_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiment")),
        sa.UniqueConstraint("key", name=op.f("uq_experiment_key")),
    )
    op.create_table(
        "arm",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("weight", sa.Double(), nullable=False),
        sa.CheckConstraint("weight > 0", name=op.f("ck_arm_weight_positive")),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiment.id"], ondelete="CASCADE",
                                name=op.f("fk_arm_experiment_id_experiment")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_arm")),
        sa.UniqueConstraint("experiment_id", "key", name=op.f("uq_arm_experiment_id_key")),
    )
    op.create_table(
        "impression",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("impression_key", sa.String(256), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("arm_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("served_at", sa.BigInteger(), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("items", ITEM_LIST, nullable=False),
        sa.Column("scores", SCORE_LIST, nullable=True),
        sa.Column("baseline_items", ITEM_LIST, nullable=True),
        sa.Column("context", JSON_DOC, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_impression")),
        sa.UniqueConstraint("impression_key", name=op.f("uq_impression_impression_key")),
    )
    op.create_index(op.f("ix_impression_experiment_id_served_at"), "impression",
                    ["experiment_id", "served_at"])
    op.create_table(
        "interaction",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("event_key", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("item_id", sa.String(256), nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("occurred_at", sa.BigInteger(), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("impression_key", sa.String(256), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_interaction")),
        sa.UniqueConstraint("event_key", name=op.f("uq_interaction_event_key")),
    )
    op.create_index(op.f("ix_interaction_user_id_occurred_at"), "interaction",
                    ["user_id", "occurred_at"])
    op.create_index(op.f("ix_interaction_impression_key"), "interaction", ["impression_key"])


def downgrade() -> None:
    op.drop_index(op.f("ix_interaction_impression_key"), table_name="interaction")
    op.drop_index(op.f("ix_interaction_user_id_occurred_at"), table_name="interaction")
    op.drop_table("interaction")
    op.drop_index(op.f("ix_impression_experiment_id_served_at"), table_name="impression")
    op.drop_table("impression")
    op.drop_table("arm")
    op.drop_table("experiment")
