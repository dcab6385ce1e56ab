"""``log_expiry``: the runs of ``tracker logs expire`` (see :mod:`tracker.store.lifecycle`)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from tracker.store.base import Base
from tracker.store.types import EpochMicros


class LogExpiry(Base):
    """One run of ``tracker logs expire``: raw rows dated before ``expired_before`` were
    deleted (``impressions`` and ``interactions`` of them) at ``ran_at``. The latest
    ``expired_before`` is the retention horizon of every experiment: the rollup never
    recomputes a day whose inputs reach before it."""

    __tablename__ = "log_expiry"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    expired_before: Mapped[datetime] = mapped_column(EpochMicros)
    ran_at: Mapped[datetime] = mapped_column(EpochMicros)
    impressions: Mapped[int] = mapped_column(sa.BigInteger)
    interactions: Mapped[int] = mapped_column(sa.BigInteger)
