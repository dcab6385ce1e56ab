"""Tables the rollup writes: its incremental state and the layers of DESIGN.md's data flow.

- ``rollup_state``: per experiment, the highest impression and interaction ids already taken
  into account (the watermarks), advanced in the same transaction as the results they cover;
  NULL after a reset (a catalog declaration, the start of a full rebuild): the next run
  recomputes every day. ``generation`` counts the declarations: a run records its
  watermarks only if none happened since it started (compare-and-set), so a declaration
  racing a run is never lost. ``source``: whose logs the results came from (``database``,
  or ``spark:<state directory>``, whose manifest is then the watermark): a run of another
  source takes the experiment over with a rebuild (:mod:`tracker.rollup.sources`).
- ``rollup_day``: per experiment and reporting day, when its attribution windows close and
  when it was last computed (a day computed before its windows closed is *provisional*).
- ``rollup_units``, ``rollup_popularity``, ``rollup_exposure``: the
  state the rollup keeps between runs, each value (``data``) one self-describing Arrow IPC
  stream with named columns and its format and version in the schema metadata; the store
  only keeps the bytes (the formats: :mod:`tracker.rollup.state`).
- ``rollup_units``: each day's unit outcomes: the (user, cell) rows of the day with the
  user's per-metric sums and counts, in parts of at most 256 MiB of sums each (``part`` 0,
  1, ...), well inside the 1 GiB a PostgreSQL value or a SQLite blob may hold
  (``cumulative`` is false: the release before kept its checkpoint here too).
- ``rollup_checkpoint``, ``rollup_user_totals``: the cumulative pass's checkpoint, the
  newest day whose cumulative view is final: the view's exact sums on it, and each user's
  totals through it, one row per user (read and written only for the users a run's days
  hold: :mod:`tracker.rollup.cumulative`).
- ``rollup_popularity``: per experiment, one row: the item popularity of its reference
  period (what surprisal reads on every day), the ``window_days`` days before ``day``, the
  experiment's first day (:mod:`tracker.rollup.popularity`); dropped when rows dated in
  that period are logged late or erased, and computed again by the next run.
- ``rollup_exposure``: item exposure per arm and day, daily and cumulative (arm 0: the
  catalog).
- ``rollup_metric``: the arm-day sufficient statistics, daily and cumulative.
- ``rollup_health``: users, impressions and crossover users per arm (arm 0: the experiment).
- ``rollup_first_seen``: per experiment and day, the users whose first unit row in the
  experiment is that day (Arrow IPC, ``first_seen/1``); ``rollup_exposure_day``: the arm
  sufficient statistics of one calendar day split by days since each user's first exposure
  (the ``exposure_day`` view adds them up over calendar days;
  :mod:`tracker.rollup.exposure_days`).
- ``rollup_slice_count``: per day, the lists per value of each declared list dimension,
  from which the levels its slices keep come (``rollup_state.levels``: those of the
  stored results).
- ``rollup_user_covariates``, ``rollup_covariate_sums``: CUPED's per-user pre-exposure
  covariates of an experiment (one row per user), and per day, view, arm, metric and k the
  sums of the covariates the adjustment reads (plain columns, like ``rollup_metric``).

``rollup_metric``, ``rollup_health``, ``rollup_exposure``, ``rollup_exposure_day`` and
``rollup_covariate_sums`` name a cell by ``arm_id`` and its slice: ``segment``, a declared
dimension (``experiment.segments``), and ``slice``, its value; both ``""`` for the whole
arm (:data:`WHOLE_ARM`).

The store knows no metric: ``metric`` is a name the rollup chose, ``k`` 0 when none.
"""

from __future__ import annotations

from datetime import date, datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from tracker.store.base import Base
from tracker.store.types import EpochMicros

METRIC_KINDS = ("user", "set")

WHOLE_ARM = ""
"""``segment`` and ``slice`` of a row about a whole arm (or the whole experiment), in no
slice of a declared dimension."""

CROSSOVER = "(crossover)"
"""The ``segment`` of the cumulative view's crossover cells
(:data:`tracker.rollup.cells.CROSSED`): per arm, the users exposed to more than one arm
whose first exposure was in it, over every list of theirs (``slice`` ``(first arm)``)."""

SOURCE_DATABASE = "database"
"""``rollup_state.source`` of results the default engine computed from the database's logs
(:mod:`tracker.rollup.sources`)."""


class RollupState(Base):
    __tablename__ = "rollup_state"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    impressions_seen: Mapped[int | None] = mapped_column(sa.BigInteger)
    interactions_seen: Mapped[int | None] = mapped_column(sa.BigInteger)
    updated_at: Mapped[datetime | None] = mapped_column(EpochMicros)  # of the last run
    generation: Mapped[int] = mapped_column(sa.BigInteger, server_default="0")
    source: Mapped[str | None] = mapped_column(sa.Text)  # tracker.rollup.sources
    # the levels of the list dimensions the stored results are sliced by (JSON), as the
    # rollup last published them (tracker.rollup.levels); NULL: none
    levels: Mapped[str | None] = mapped_column(sa.Text)


class RollupDay(Base):
    __tablename__ = "rollup_day"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    impressions: Mapped[int] = mapped_column(sa.BigInteger)
    users: Mapped[int] = mapped_column(sa.BigInteger)
    closes_at: Mapped[datetime] = mapped_column(EpochMicros)
    computed_at: Mapped[datetime] = mapped_column(EpochMicros)


class RollupUnits(Base):
    """A day's per-user unit totals, in parts: the daily ones (``cumulative`` false), and,
    from a recompute of a day the cumulative checkpoint counted to the run's cumulative
    pass, the ones it counted (``cumulative`` true:
    :func:`tracker.store.results.delete_day_state`)."""

    __tablename__ = "rollup_units"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    cumulative: Mapped[bool] = mapped_column(sa.Boolean, primary_key=True)
    part: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    data: Mapped[bytes] = mapped_column(sa.LargeBinary)  # Arrow IPC stream, "units/2"


class RollupPopularity(Base):
    """An experiment's item popularity (what surprisal reads on every day): the items
    with their distinct users, and N, the distinct users, of the interactions in the
    ``window_days`` days before ``day``, the experiment's first day."""

    __tablename__ = "rollup_popularity"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    window_days: Mapped[int] = mapped_column(sa.Integer)
    data: Mapped[bytes] = mapped_column(sa.LargeBinary)  # Arrow IPC stream, "popularity/3"


class RollupExposure(Base):
    """Item exposure of one arm on one day (or from the first day through it): the arm's
    served items, sorted, and their exposure counts: how many lists held the item in their
    top k, per cutoff (an Arrow IPC stream, "exposure/1"). Arm 0 holds the catalog (items
    served or in a ground truth) with no counts. One row per arm and
    day, read and merged in numpy: the set metrics cost the same whatever the history."""

    __tablename__ = "rollup_exposure"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    cumulative: Mapped[bool] = mapped_column(sa.Boolean, primary_key=True)
    arm_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    segment: Mapped[str] = mapped_column(sa.String(64), primary_key=True,
                                         server_default="")  # "": the whole arm
    slice: Mapped[str] = mapped_column(sa.Text, primary_key=True, server_default="")
    data: Mapped[bytes] = mapped_column(sa.LargeBinary)  # Arrow IPC stream, "exposure/1"


class RollupMetric(Base):
    __tablename__ = "rollup_metric"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    cumulative: Mapped[bool] = mapped_column(sa.Boolean, primary_key=True)
    arm_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    segment: Mapped[str] = mapped_column(sa.String(64), primary_key=True,
                                         server_default="")  # "": the whole arm
    slice: Mapped[str] = mapped_column(sa.Text, primary_key=True, server_default="")
    metric: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    k: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(sa.String(8))
    users: Mapped[int] = mapped_column(sa.BigInteger)
    sum: Mapped[float] = mapped_column(sa.Double)
    sum_sq: Mapped[float] = mapped_column(sa.Double)
    impressions: Mapped[float] = mapped_column(sa.Double)
    impressions_sq: Mapped[float] = mapped_column(sa.Double)
    ratio_sum: Mapped[float] = mapped_column(sa.Double)
    ratio_sum_sq: Mapped[float] = mapped_column(sa.Double)
    ratio_cross: Mapped[float] = mapped_column(sa.Double)
    provisional: Mapped[bool] = mapped_column(sa.Boolean)

    __table_args__ = (
        sa.CheckConstraint("kind IN ('user', 'set')", name="kind"),
    )


class RollupUserCovariates(Base):
    """One user's pre-exposure covariates and first exposure in one experiment, one row per
    user (``data``: little-endian float64 in the order of the names ``rollup_checkpoint``'s
    ``covariates`` gives), so a run reads them for the users it holds instead of weeks of
    interactions, and writes only those it computed (:mod:`tracker.rollup.stored_covariates`)."""

    __tablename__ = "rollup_user_covariates"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    user_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    first_exposure: Mapped[int] = mapped_column(sa.BigInteger)
    data: Mapped[bytes] = mapped_column(sa.LargeBinary)


COVARIATES = ("pre_interactions", "pre_graded", "no_pre_period", "pre_metric", "no_pre_lists")
"""The covariates of CUPED's sums, in order (``pre_metric``: in the row of a metric column,
that column's own value before exposure)."""


COVARIATE_PAIRS = tuple((a, b) for a in range(len(COVARIATES))
                        for b in range(a, len(COVARIATES)))
"""The pairs a ≤ b (indices into :data:`COVARIATES`) of the cross sums, in order."""


def covariate_sum_columns() -> list[tuple[str, str]]:
    """The value columns of ``rollup_covariate_sums``: (name, SQL column) pairs in order.
    Σx_c (``x:<c>``), Σx_a·x_b over :data:`COVARIATE_PAIRS` (``xx:<a>*<b>``), and Σx_c
    times the user's mean, sum and impressions (``xy:<c>``, ``xs:<c>``, ``xm:<c>``)."""
    names = [f"x:{c}" for c in COVARIATES]
    names += [f"xx:{COVARIATES[a]}*{COVARIATES[b]}" for a, b in COVARIATE_PAIRS]
    for prefix in ("xy", "xs", "xm"):
        names += [f"{prefix}:{c}" for c in COVARIATES]
    return [(name, name.replace(":", "_").replace("*", "__")) for name in names]


class RollupCovariateSums(Base):
    """The per-arm, per-metric covariate sums CUPED reads for one day and view: one row per
    (arm, metric, k), a column per sum (:func:`covariate_sum_columns`), beside the
    ``rollup_metric`` row of the same users."""

    __table__ = sa.Table(
        "rollup_covariate_sums", Base.metadata,
        sa.Column("experiment_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("cumulative", sa.Boolean, primary_key=True),
        sa.Column("arm_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("segment", sa.String(64), primary_key=True, server_default=""),
        sa.Column("slice", sa.Text, primary_key=True, server_default=""),
        sa.Column("metric", sa.String(64), primary_key=True),
        sa.Column("k", sa.Integer, primary_key=True, autoincrement=False),
        *[sa.Column(column, sa.Double, nullable=False)
          for _, column in covariate_sum_columns()],
    )


class RollupHealth(Base):
    __tablename__ = "rollup_health"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    cumulative: Mapped[bool] = mapped_column(sa.Boolean, primary_key=True)
    arm_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    segment: Mapped[str] = mapped_column(sa.String(64), primary_key=True,
                                         server_default="")  # "": the whole arm
    slice: Mapped[str] = mapped_column(sa.Text, primary_key=True, server_default="")
    users: Mapped[int] = mapped_column(sa.BigInteger)
    impressions: Mapped[int] = mapped_column(sa.BigInteger)
    crossover_users: Mapped[int] = mapped_column(sa.BigInteger)
    provisional: Mapped[bool] = mapped_column(sa.Boolean)


class RollupFirstSeen(Base):
    __tablename__ = "rollup_first_seen"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    data: Mapped[bytes] = mapped_column(sa.LargeBinary)  # Arrow IPC stream, "first_seen/1"


class RollupExposureDay(Base):
    """The sufficient statistics of ``rollup_metric`` (per-user metrics) of one calendar
    ``day``, over the users whose first exposure was ``exposure_day`` days before it."""

    __tablename__ = "rollup_exposure_day"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    exposure_day: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    arm_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    segment: Mapped[str] = mapped_column(sa.String(64), primary_key=True,
                                         server_default="")  # "": the whole arm
    slice: Mapped[str] = mapped_column(sa.Text, primary_key=True, server_default="")
    metric: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    k: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    users: Mapped[int] = mapped_column(sa.BigInteger)
    sum: Mapped[float] = mapped_column(sa.Double)
    sum_sq: Mapped[float] = mapped_column(sa.Double)
    impressions: Mapped[float] = mapped_column(sa.Double)
    impressions_sq: Mapped[float] = mapped_column(sa.Double)
    ratio_sum: Mapped[float] = mapped_column(sa.Double)
    ratio_sum_sq: Mapped[float] = mapped_column(sa.Double)
    ratio_cross: Mapped[float] = mapped_column(sa.Double)
    provisional: Mapped[bool] = mapped_column(sa.Boolean)

    __table_args__ = (
        sa.CheckConstraint("exposure_day >= 0", name="exposure_day_not_negative"),
    )


class RollupSliceCount(Base):
    """Lists per value of a declared list dimension on one day (``slice``: the value of
    the lists' ``context`` key ``segment``, ``(none)`` without one), counted when the day
    is read whole; the most frequent values over every day are the dimension's levels
    (:mod:`tracker.rollup.levels`)."""

    __tablename__ = "rollup_slice_count"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    day: Mapped[date] = mapped_column(sa.Date, primary_key=True)
    segment: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    slice: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    lists: Mapped[int] = mapped_column(sa.BigInteger)


class RollupCheckpoint(Base):
    """What describes an experiment's per-user state. The cumulative pass's checkpoint
    (:mod:`tracker.rollup.cumulative`; NULL: none yet): the day through which it holds each
    user's totals (``rollup_user_totals``), their format and layout columns (JSON:
    ``{"format": "user-totals/2", "columns": [...]}``) and the cumulative view's exact sums
    on that day (``view-sums/1``, :class:`tracker.rollup.deltas.ViewSums`; NULL: to compute
    once from every user's totals, as migration 0021 leaves it). CUPED's covariates
    (``rollup_user_covariates``; NULL: none): JSON ``{"format": "covariates/4",
    "cuped_days": ..., "names": [...], "first": [min, max]}``, the bounds of the stored
    first exposures."""

    __tablename__ = "rollup_checkpoint"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    day: Mapped[date | None] = mapped_column(sa.Date, nullable=True)
    columns: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    sums: Mapped[bytes | None] = mapped_column(sa.LargeBinary, nullable=True)
    covariates: Mapped[str | None] = mapped_column(sa.Text, nullable=True)


class RollupUserTotals(Base):
    """One user's totals through the checkpoint's day, one row per user, so that a run
    reads and writes only the users its days hold: ``data`` is the user's (cell) rows as
    little-endian records of cell (int64), impressions (int64), then the sum of every layout
    column and then their counts (float64) (``user-totals/1``), compressed as an LZ4 frame
    after their size (``user-totals/2``, :func:`tracker.rollup.stores.pack`)."""

    __tablename__ = "rollup_user_totals"

    experiment_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    user_id: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    data: Mapped[bytes] = mapped_column(sa.LargeBinary)


ROLLUP_TABLES = (
    RollupState.__table__, RollupDay.__table__, RollupUnits.__table__,
    RollupCheckpoint.__table__, RollupUserTotals.__table__,
    RollupPopularity.__table__, RollupExposure.__table__, RollupMetric.__table__,
    RollupHealth.__table__, RollupFirstSeen.__table__, RollupExposureDay.__table__,
    RollupUserCovariates.__table__, RollupCovariateSums.__table__,
    RollupSliceCount.__table__,
)
