"""Tables of the raw logs and the experiment registry (SQLAlchemy 2 typed models).

ORM classes hold columns and constraints only; the functions of this package return plain
dataclasses, never these rows. The schema changes only through ``migrations/`` (a test checks
that the tables of :mod:`tracker.store.tables` and the migrated schema agree).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from tracker.store.base import ID_LENGTH, KEY_LENGTH, Base, one_of
from tracker.store.types import BIG_ID, ITEM_LIST, JSON_DOC, SCORE_LIST, EpochMicros

EXPERIMENT_STATUSES = ("draft", "running", "stopped", "archived")
UNKNOWN_EVENT_POLICIES = ("reject", "zero")


class Experiment(Base):
    __tablename__ = "experiment"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(KEY_LENGTH), unique=True)
    name: Mapped[str] = mapped_column(sa.String(KEY_LENGTH))
    description: Mapped[str] = mapped_column(sa.Text, default="")
    status: Mapped[str] = mapped_column(sa.String(16), default="running")
    starts_at: Mapped[datetime | None] = mapped_column(EpochMicros)
    ends_at: Mapped[datetime | None] = mapped_column(EpochMicros)
    control_arm: Mapped[str] = mapped_column(sa.String(KEY_LENGTH))
    attribution_window_us: Mapped[int] = mapped_column(sa.BigInteger)
    relevance: Mapped[dict[str, Any] | None] = mapped_column(JSON_DOC)
    unknown_events: Mapped[str] = mapped_column(sa.String(16), default="reject")
    timezone: Mapped[str] = mapped_column(sa.String(64), default="UTC")
    cutoffs: Mapped[list[int]] = mapped_column(JSON_DOC)
    # {"primary": [name, ...], "guardrails": {name: tolerated relative loss}}; NULL: none
    # declared (the report's defaults apply). Checked by tracker.ingest.validate.check_roles.
    roles: Mapped[dict[str, Any] | None] = mapped_column(JSON_DOC)
    # days of pre-exposure history the CUPED covariates cover (0: no adjustment); checked by
    # tracker.ingest.experiments
    cuped_days: Mapped[int] = mapped_column(sa.Integer, default=14, server_default="14")
    created_at: Mapped[datetime] = mapped_column(EpochMicros)
    # the pinned analysis plan {"intervals", "cuped", "correction", "target_effect"}; NULL:
    # the defaults (tracker.store.experiments.AnalysisPlan). The planned end is ends_at.
    plan: Mapped[dict[str, Any] | None] = mapped_column(JSON_DOC)
    # the declared dimensions results are sliced by, in order: [{"name", "kind": "user" |
    # "list", "max_levels"}]; NULL: none (tracker.store.experiments.Segment, checked by
    # tracker.ingest.experiments.check_segments)
    segments: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON_DOC)

    __table_args__ = (
        sa.CheckConstraint(one_of("status", EXPERIMENT_STATUSES), name="status"),
        sa.CheckConstraint(one_of("unknown_events", UNKNOWN_EVENT_POLICIES), name="unknown_events"),
        sa.CheckConstraint("attribution_window_us > 0", name="attribution_window_positive"),
    )


class PlanChange(Base):
    """One change of an experiment's analysis plan or planned end (creation included): when,
    and the whole plan after it, planned end included (ISO 8601, or null)."""

    __tablename__ = "plan_change"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    experiment_id: Mapped[int] = mapped_column(
        sa.ForeignKey("experiment.id", ondelete="CASCADE"), index=True)
    changed_at: Mapped[datetime] = mapped_column(EpochMicros)
    plan: Mapped[dict[str, Any]] = mapped_column(JSON_DOC)


class Arm(Base):
    __tablename__ = "arm"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    experiment_id: Mapped[int] = mapped_column(
        sa.ForeignKey("experiment.id", ondelete="CASCADE")
    )
    key: Mapped[str] = mapped_column(sa.String(KEY_LENGTH))
    weight: Mapped[float] = mapped_column(sa.Double)

    __table_args__ = (
        sa.UniqueConstraint("experiment_id", "key"),
        sa.CheckConstraint("weight > 0", name="weight_positive"),
    )


class Impression(Base):
    """One served recommendation list: who saw which items, in which order, in which arm."""

    __tablename__ = "impression"

    id: Mapped[int] = mapped_column(BIG_ID, primary_key=True)
    impression_key: Mapped[str] = mapped_column(sa.String(ID_LENGTH), unique=True)
    # No FOREIGN KEY on these two: ingest checks them against the registry (the only writer),
    # and per-row FK triggers cut PostgreSQL COPY throughput about 3x (measured, see
    # benchmarks/README.md). An experiment is deleted only together with its impressions
    # (tracker.store.lifecycle.delete_experiment).
    experiment_id: Mapped[int] = mapped_column(sa.Integer)
    arm_id: Mapped[int] = mapped_column(sa.Integer)
    user_id: Mapped[str] = mapped_column(sa.String(ID_LENGTH))
    served_at: Mapped[datetime] = mapped_column(EpochMicros)
    received_at: Mapped[datetime] = mapped_column(EpochMicros)
    items: Mapped[list[str]] = mapped_column(ITEM_LIST)
    scores: Mapped[list[float] | None] = mapped_column(SCORE_LIST)
    baseline_items: Mapped[list[str] | None] = mapped_column(ITEM_LIST)
    context: Mapped[dict[str, Any] | None] = mapped_column(JSON_DOC)

    __table_args__ = (
        sa.Index(None, "experiment_id", "served_at"),
        sa.Index(None, "user_id", "served_at"),  # CUPED: a user's lists before exposure
    )


class Interaction(Base):
    """One user event on an item (click, play, save, purchase...)."""

    __tablename__ = "interaction"

    id: Mapped[int] = mapped_column(BIG_ID, primary_key=True)
    event_key: Mapped[str] = mapped_column(sa.String(ID_LENGTH), unique=True)
    user_id: Mapped[str] = mapped_column(sa.String(ID_LENGTH))
    item_id: Mapped[str] = mapped_column(sa.String(ID_LENGTH))
    event_type: Mapped[str] = mapped_column(sa.String(64))
    value: Mapped[float | None] = mapped_column(sa.Double)
    occurred_at: Mapped[datetime] = mapped_column(EpochMicros)
    received_at: Mapped[datetime] = mapped_column(EpochMicros)
    impression_key: Mapped[str | None] = mapped_column(sa.String(ID_LENGTH))

    __table_args__ = (
        sa.Index(None, "user_id", "occurred_at"),
        sa.Index(None, "impression_key"),
        sa.Index(None, "occurred_at"),  # the rollup's item popularity before a day
    )


class CatalogItem(Base):
    """An item of an experiment's declared catalog: with the items seen in its logs, the
    denominator of coverage and the population of the Gini index."""

    __tablename__ = "catalog_item"

    experiment_id: Mapped[int] = mapped_column(
        sa.ForeignKey("experiment.id", ondelete="CASCADE"), primary_key=True
    )
    item_id: Mapped[str] = mapped_column(sa.String(ID_LENGTH), primary_key=True)
