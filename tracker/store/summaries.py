"""``experiment_summary``: one stored line per experiment for the experiments list.

Written at the end of each rollup run (:func:`tracker.publish.after_rollup`) from the
scorecard under the experiment's plan, so the list page reads one small row per experiment
instead of rebuilding every scorecard on each load. The document is plain JSON (the fields
of :class:`tracker.report.summary.ExperimentSummary`); the store does not interpret it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from tracker.store.base import Base
from tracker.store.models import Experiment
from tracker.store.types import JSON_DOC, EpochMicros


class ExperimentSummaryRow(Base):
    """The latest summary of one experiment and when the rollup wrote it."""

    __tablename__ = "experiment_summary"

    experiment_id: Mapped[int] = mapped_column(
        sa.ForeignKey("experiment.id", ondelete="CASCADE"), primary_key=True,
        autoincrement=False)
    written_at: Mapped[datetime] = mapped_column(EpochMicros)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON_DOC)


def write_summary(conn: sa.Connection, experiment_id: int, summary: dict[str, Any],
                  written_at: datetime) -> None:
    """Replace experiment ``experiment_id``'s stored summary."""
    table = ExperimentSummaryRow.__table__
    conn.execute(sa.delete(table).where(table.c.experiment_id == experiment_id))
    conn.execute(sa.insert(table).values(experiment_id=experiment_id, summary=summary,
                                         written_at=written_at))


def read_summaries(conn: sa.Connection, keys: list[str] | None = None
                   ) -> dict[str, tuple[datetime, dict[str, Any]]]:
    """Experiment key -> (when written, stored summary), for the experiments that have one
    (all, or those of ``keys``)."""
    table = ExperimentSummaryRow.__table__
    query = (sa.select(Experiment.key, table.c.written_at, table.c.summary)
             .join(table, table.c.experiment_id == Experiment.id))
    if keys is not None:
        query = query.where(Experiment.key.in_(keys))
    return {key: (at, summary) for key, at, summary in conn.execute(query)}
