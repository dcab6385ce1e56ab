"""The in-process logging API: ``Tracker``.

>>> from tracker import Tracker                                    # doctest: +SKIP
>>> t = Tracker()                     # TRACKER_DATABASE_URL or ./tracker.db  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from tracker.config import Settings, normalize_database_url
from tracker.errors import AlreadyExists, ConfigError, ConflictError, ValidationError
from tracker.ingest import write
from tracker.ingest.experiments import check_plan
from tracker.ingest.frames import frame_records
from tracker.ingest.result import IngestResult
from tracker.ingest.validate import (
    Reject,
    check_id,
    check_roles,
    experiment_fields,
    experiment_update_fields,
)
from tracker.rollup.retention import recomputable
from tracker.store import experiments as registry
from tracker.store.db import create_engine, require_current_schema, transaction
from tracker.store.experiments import AnalysisPlan, ExperimentInfo, PlanRecord, Segment
from tracker.store.models import ID_LENGTH
from tracker.store.types import from_micros


class Tracker:
    """Log experiments, served lists and interactions to the tracker database.

    ``Tracker()`` uses ``TRACKER_DATABASE_URL`` (default: SQLite ``./tracker.db``);
    ``Tracker(url)`` another database. The database must be at the current schema
    (``tracker db upgrade``), otherwise :class:`~tracker.errors.SchemaOutdated` is raised.
    """

    def __init__(self, url: str | None = None, *, settings: Settings | None = None,
                 check_schema: bool = True):
        self.settings = settings or Settings.from_env()
        if url is not None:
            try:
                url = normalize_database_url(url)
            except ValueError as exc:
                raise ConfigError(f"database URL {url!r}: expected {exc}") from None
            self.settings = self.settings.replace(database_url=url)
        self.engine = create_engine(self.settings.database_url, self.settings)
        if check_schema:
            require_current_schema(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ experiments
    def create_experiment(
        self, key: str, arms: Mapping[str, float], *, control: str | None = None,
        attribution_window: timedelta | float = timedelta(hours=24),
        relevance: Mapping[str, float] | None = None, name: str | None = None,
        description: str = "", status: str = "running", starts_at: datetime | None = None,
        ends_at: datetime | None = None, timezone: str = "UTC",
        cutoffs: Sequence[int] = (5, 10, 20), unknown_events: str = "reject",
        primary: Sequence[str] = (), guardrails: Mapping[str, float] | None = None,
        exist_ok: bool = False, cuped_days: int = 14, intervals: str = "fixed_horizon",
        cuped: bool = True, correction: str = "holm", target_effect: float = 0.05,
        segments: Sequence[str | Segment] = (), max_levels: int | None = None,
    ) -> ExperimentInfo:
        """Register an experiment and its arms.

        ``arms`` maps arm keys to traffic weights (any positive numbers; the declared split is
        weight / total). ``control`` defaults to the first arm. ``relevance`` maps event types
        to grades (0 = not relevant); None counts every event as grade 1. ``unknown_events``:
        "reject" event types the mapping lacks, or "zero" to store them with grade 0.
        ``primary``: the success metrics (``"ndcg@10"``; ``"song_clicks"`` for metrics without
        a cutoff, k one of ``cutoffs``); ``guardrails``: metric name -> tolerated relative
        loss in [0, 1) (0.05 = 5 %). Every other metric is secondary; none given: the
        report's defaults apply. ``cuped_days``: the days of each user's history before
        their first exposure that CUPED's covariates cover (0 turns the adjustment off).
        ``segments`` (``["device", "surface:list"]``) and ``max_levels``: the dimensions to
        slice results by (:func:`~tracker.ingest.experiments.check_segments`;
        docs/segments.md): the default engine's rollup slices every result by them.

        The analysis plan, pinned on the experiment and used by the report, the experiments
        list and the dashboard: ``intervals`` ("fixed_horizon", or "sequential" for
        always-valid intervals under daily looks), ``cuped`` (adjust the comparisons),
        ``correction`` over the primaries ("holm" or "bh"), ``target_effect`` (the relative
        effect each primary must be able to detect) and ``ends_at`` (the planned end). Every
        change (:meth:`update_experiment`) is recorded with its time (:meth:`plan_history`).

        ``exist_ok=True``: when ``key`` is already stored, return it unchanged instead of
        raising AlreadyExists (a script may then run again). It must define the same
        experiment (arms and split, control, window, relevance, unknown-event policy, time
        zone, cutoffs: a difference raises AlreadyExists naming it); what may change later
        (name, description, status, dates, roles, segments) is not compared.
        """
        fields = experiment_fields(
            key=key, arms=arms, control=control, attribution_window=attribution_window,
            relevance=relevance, name=name, description=description, status=status,
            starts_at=starts_at, ends_at=ends_at, timezone=timezone, cutoffs=cutoffs,
            unknown_events=unknown_events, max_items=self.settings.max_items,
            now_us=write.now_micros(), cuped_days=cuped_days,
            plan=check_plan(AnalysisPlan(), intervals=intervals, cuped=cuped,
                            correction=correction, target_effect=target_effect),
            segments=segments, max_levels=max_levels)
        roles = check_roles(primary=primary, guardrails=guardrails or {},
                            cutoffs=fields["cutoffs"])
        fields["roles"] = roles.to_dict() if roles is not None else None
        with transaction(self.engine, write=True) as conn:
            if exist_ok:
                stored = registry.find_experiment(conn, key)
                if stored is not None:
                    _require_same_definition(stored, fields)
                    return stored
            registry.insert_experiment(conn, **fields)
            return registry.get_experiment(conn, key)

    def update_experiment(
        self, key: str, *, primary: Sequence[str] | None = None,
        guardrails: Mapping[str, float] | None = None, name: str | None = None,
        description: str | None = None, ends_at: datetime | str | None = None,
        cuped_days: int | None = None, intervals: str | None = None,
        cuped: bool | None = None, correction: str | None = None,
        target_effect: float | None = None, segments: Sequence[str | Segment] | None = None,
        max_levels: int | None = None,
    ) -> ExperimentInfo:
        """Change the settings of experiment ``key`` that are safe to change; None leaves one
        as it is. ``primary`` / ``guardrails`` replace that role's metrics (``[]`` / ``{}``
        empties it; both empty: no roles, the report's defaults apply). A new ``cuped_days``
        makes the next rollup recompute every day: refused with
        :class:`~tracker.errors.ExpiredLogs` (nothing changes) when expired logs make some
        of them impossible to recompute. ``intervals``, ``cuped``, ``correction``,
        ``target_effect`` and ``ends_at`` change the analysis plan; each change is recorded
        with its time (:meth:`plan_history`). ``segments`` replaces the declared dimensions
        (``[]``: none; as :meth:`create_experiment` takes them), ``max_levels`` alone sets
        the levels of those declared; a change makes the next rollup recompute every day,
        refused like a new ``cuped_days`` when expired logs forbid it. Arms, window,
        relevance, cutoffs and time zone are not offered: they decide what the stored
        results mean. Raises ValidationError (nothing changes) or NotFound.
        """
        with transaction(self.engine, write=True) as conn:
            info = registry.get_experiment(conn, key)
            values = experiment_update_fields(info, primary=primary, guardrails=guardrails,
                                              name=name, description=description,
                                              ends_at=ends_at, cuped_days=cuped_days,
                                              intervals=intervals, cuped=cuped,
                                              correction=correction,
                                              target_effect=target_effect,
                                              segments=segments, max_levels=max_levels)
            asks = registry.rebuild_asked(info, values)  # the next rollup rebuilds
            if asks is not None:
                recomputable(conn, info, set(), rebuild=True,
                             because=f"the rebuild {asks} asks for")
            registry.update_experiment(conn, key, values,
                                       now=from_micros(write.now_micros()))
            return registry.get_experiment(conn, key)

    def plan_history(self, key: str) -> list[PlanRecord]:
        """Every analysis plan experiment ``key`` had, oldest first, each with the time it
        took effect (creation, then each change of the plan or the planned end)."""
        with transaction(self.engine) as conn:
            return registry.plan_history(conn, key)

    def experiment(self, key: str) -> ExperimentInfo:
        with transaction(self.engine) as conn:
            return registry.get_experiment(conn, key)

    def experiments(self, *, include_archived: bool = False) -> list[ExperimentInfo]:
        """The experiments, archived ones only with ``include_archived``."""
        with transaction(self.engine) as conn:
            return registry.list_experiments(conn, include_archived=include_archived)

    # ------------------------------------------------------------------ lifecycle
    def start_experiment(self, key: str) -> ExperimentInfo:
        """Make a draft or stopped experiment running (it takes impressions again)."""
        return self._move(key, "running")

    def stop_experiment(self, key: str) -> ExperimentInfo:
        """Stop a running experiment: its new impressions are rejected; interactions still
        come in, so the rollup finishes the attribution windows of the lists served."""
        return self._move(key, "stopped")

    def archive_experiment(self, key: str) -> ExperimentInfo:
        """Archive a stopped experiment whose impressions are all rolled up: it leaves the
        default lists, and a rollup of every experiment skips it once its days are final.
        Raises :class:`~tracker.errors.InvalidTransition` from any other status."""
        return self._move(key, "archived")

    def _move(self, key: str, status: str) -> ExperimentInfo:
        from tracker import lifecycle

        lifecycle.change_status(self.engine, key, status)
        return self.experiment(key)

    def delete_experiment(self, key: str):
        """Delete experiment ``key``: its arms, catalog, impressions, results and rollup
        state (interactions stay: they belong to users). Returns the rows removed per table
        (:class:`tracker.lifecycle.ExperimentRemoval`). Raises
        :class:`~tracker.errors.Busy` (nothing deleted) while a rollup of it runs."""
        from tracker import lifecycle

        return lifecycle.delete_experiment(self.engine, key)

    def delete_user(self, user_id: str, *, now: datetime | None = None):
        """Erase ``user_id``'s impressions and interactions in every experiment (GDPR Art.
        17) and mark the rolled-up days they entered for recomputation by the next rollup.
        Returns what was removed per experiment (:class:`tracker.lifecycle.UserErasure`)."""
        from tracker import lifecycle

        return lifecycle.delete_user(self.engine, self.settings, user_id, now=now)

    def expire_logs(self, older_than: timedelta | None = None, *, now: datetime | None = None,
                    dry_run: bool = False):
        """Delete raw impressions and interactions older than ``older_than`` (default:
        ``TRACKER_RETENTION_DAYS``); the rollup's results of those days stay. Returns the
        rows removed (:class:`tracker.lifecycle.LogExpiry`)."""
        from tracker import lifecycle

        if older_than is None:
            if self.settings.retention_days is None:
                raise ConfigError("no age given and TRACKER_RETENTION_DAYS is not set: say "
                                  "how old the logs to expire are, e.g. 90 days")
            older_than = timedelta(days=self.settings.retention_days)
        return lifecycle.expire_logs(self.engine, self.settings, older_than, now=now,
                                     dry_run=dry_run)

    def declare_catalog(self, experiment: str, items: Iterable[str] | None) -> int:
        """Declare the item catalog of ``experiment`` (every item it could recommend),
        replacing any declared before; ``None`` removes the declaration. Returns the number
        of distinct items declared.

        Coverage@k is then |items served in the top k| / |catalog| with the catalog = these
        items plus any item seen in the experiment's impressions and interactions (without a
        declaration, only the latter); Gini counts the catalog's unexposed items at 0. The
        next rollup recomputes every day of the experiment (unless the catalog is the one
        declared already: then nothing changes). Raises
        :class:`ValidationError` on a bad id, :class:`~tracker.errors.ExpiredLogs` when
        days of the experiment can no longer be recomputed (``tracker logs expire``); then
        nothing changes.
        """
        limit = min(self.settings.max_id_length, ID_LENGTH)
        if items is None:
            declared: list[str] = []
        else:
            if isinstance(items, str | bytes | Mapping):
                raise ValidationError("catalog items must be an iterable of item ids, e.g. "
                                      "['song-1', 'song-2'], not a single string or a mapping")
            unique: dict[str, None] = {}
            for position, item in enumerate(items):
                try:
                    unique[check_id(item, "item_id", limit)] = None
                except Reject as rejection:
                    raise ValidationError(f"catalog item #{position} ({item!r}) "
                                          f"{rejection.reason}", field="item_id") from None
            if not unique:
                raise ValidationError("the catalog is empty: declare at least one item id, or "
                                      "pass None to remove a declared catalog")
            declared = list(unique)
        with transaction(self.engine, write=True) as conn:
            info = registry.get_experiment(conn, experiment)
            if set(registry.catalog(conn, info.id)) == set(declared):
                return len(declared)  # the catalog declared already: nothing to recompute
            # a declaration makes the next rollup rebuild every day: refused (ExpiredLogs)
            # when some of them can no longer be recomputed
            recomputable(conn, info, set(), rebuild=True,
                         because="the rebuild a catalog declaration asks for")
            registry.replace_catalog(conn, info.id, declared)
        return len(declared)

    def catalog(self, experiment: str) -> list[str]:
        """The declared item catalog of ``experiment``, sorted ([] when none is declared)."""
        with transaction(self.engine) as conn:
            return registry.catalog(conn, registry.get_experiment(conn, experiment).id)

    # ------------------------------------------------------------------ single events
    def log_impression(
        self, *, experiment: str, arm: str, user_id: str, items: Sequence[str],
        served_at: datetime, scores: Sequence[float] | None = None,
        impression_id: str | None = None, baseline_items: Sequence[str] | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> IngestResult:
        """Store one served list. Returns the result (``stored`` or ``duplicates`` is 1).

        Raises :class:`ValidationError` for invalid input (nothing stored) and
        :class:`ConflictError` when ``impression_id`` is stored with a different payload.
        Without ``impression_id`` a random one is made (then a retry cannot be recognised).
        """
        record = {"experiment": experiment, "arm": arm, "user_id": user_id, "items": items,
                  "scores": scores, "served_at": served_at, "impression_id": impression_id,
                  "baseline_items": baseline_items, "context": context}
        result = write.log_impressions(self.engine, self.settings, [record],
                                       on_invalid="all_or_nothing", require_id=False)
        return _single(result, "impression")

    def log_interaction(
        self, *, user_id: str, item_id: str, event: str, occurred_at: datetime,
        event_id: str | None = None, impression_id: str | None = None,
        value: float | None = None,
    ) -> IngestResult:
        """Store one interaction; ``impression_id`` attributes it to that impression only."""
        record = {"user_id": user_id, "item_id": item_id, "event": event,
                  "occurred_at": occurred_at, "event_id": event_id,
                  "impression_id": impression_id, "value": value}
        result = write.log_interactions(self.engine, self.settings, [record],
                                        on_invalid="all_or_nothing", require_id=False)
        return _single(result, "interaction")

    # ------------------------------------------------------------------ bulk
    def log_impressions(self, records: Any, *, on_invalid: str = "skip",
                        progress: Callable[[int], None] | None = None) -> IngestResult:
        """Store many impressions: a pandas DataFrame or an iterable of dicts with the fields
        of :meth:`log_impression` (``impression_id`` required). Invalid records are reported
        in ``result.rejected`` (and, with ``on_invalid="all_or_nothing"``, nothing is stored).
        """
        source, micros = _records(records)
        return write.log_impressions(self.engine, self.settings, source, on_invalid=on_invalid,
                                     micros_ok=micros, progress=progress)

    def log_interactions(self, records: Any, *, on_invalid: str = "skip",
                         progress: Callable[[int], None] | None = None) -> IngestResult:
        """Store many interactions (DataFrame or iterable of dicts; ``event_id`` required)."""
        source, micros = _records(records)
        return write.log_interactions(self.engine, self.settings, source, on_invalid=on_invalid,
                                      micros_ok=micros, progress=progress)

    # ------------------------------------------------------------------ results
    def rollup(self, experiment: str | None = None, *, full: bool = False,
               until: date | None = None, now: datetime | None = None) -> list:
        """Run the incremental rollup (one experiment, or all); returns one
        :class:`~tracker.rollup.engine.RollupSummary` per experiment. Of all: one that fails
        does not stop the others, and :class:`~tracker.errors.RollupIncomplete` then names
        it and carries the others' summaries; one rolled up on Spark is left to it (its
        summary says so). Naming an experiment rolled up on Spark moves it here: every day
        is rebuilt from the database's logs (:mod:`tracker.rollup.sources`)."""
        from tracker.rollup.engine import run_rollup

        return run_rollup(self.engine, self.settings, experiment, full=full, until=until,
                          now=now)

    def metric_table(self, experiment: str, cumulative: bool = False, *,
                     view: str | None = None, segment: str | None = None):
        """Per (day, arm, metric, k) sufficient statistics and means, as a DataFrame
        (see :func:`tracker.store.computed.metric_table` for the columns). ``view``:
        ``"daily"`` (the default), ``"cumulative"`` (as ``cumulative=True``) or
        ``"exposure_day"``: per (exposure_day, arm, metric, k), day 0 being each user's
        first exposure day (:func:`tracker.store.computed.exposure_day_table`).
        ``segment``: a declared dimension's slices instead of the whole arms, their
        values in a ``slice`` column after ``arm`` (any view)."""
        from tracker.store.computed import exposure_day_table, metric_table, metric_view

        if segment is not None:
            if view == "exposure_day":
                return exposure_day_table(self.engine, experiment, segment=segment)
            return metric_table(self.engine, experiment, cumulative or view == "cumulative",
                                segment=segment)
        return metric_view(self.engine, experiment, view or
                           ("cumulative" if cumulative else "daily"))

    def scorecard(self, experiment: str, *, metrics: Iterable[str] = (),
                  ks: Iterable[int] = (), cumulative: bool = True,
                  segment: str | None = None, **options):
        """The rows of ``tracker report EXPERIMENT --format json`` as a DataFrame, one per
        (metric, k, arm), with the same fields (``role``, ``group``, ``direction``,
        ``verdict``, ...). ``frame.attrs["decisions"]`` holds the report's decision per
        treatment arm and ``frame.attrs["health"]`` its health (``status``, ``checklist``,
        ...), as in the JSON.

        ``metrics`` and ``ks`` filter like ``--metric`` and ``--k``; ``options`` are those of
        :func:`tracker.report.scorecard` (``as_of``, ``level``, ``intervals``, ``primary``,
        ``guardrails``, ``target_effect``, ...); roles default to the experiment's.

        ``segment``: one row per (metric, k, arm, slice) of that declared dimension instead
        (:func:`tracker.report.segment_report`: verdicts adjusted across its slices,
        exploratory), with ``frame.attrs["srm"]``, ``["heterogeneity"]`` and ``["notes"]``.
        """
        from tracker.report import report, segment_report, select

        if segment is not None:
            found = segment_report(self.engine, experiment, segment, cumulative=cumulative,
                                   **options)
            frame = found.to_frame(metrics, ks)
            frame.attrs.update(srm=found.srm, heterogeneity=found.heterogeneity,
                               notes=found.notes)
            return frame
        card = report(self.engine, experiment, cumulative=cumulative, **options)
        frame = select(card, metrics, ks).to_frame()
        frame.attrs.update(decisions=card.decisions, health=card.health)
        return frame

    def health_table(self, experiment: str, cumulative: bool = False):
        """Users, impressions and crossover users per arm and day, as a DataFrame."""
        from tracker.store.computed import health_table

        return health_table(self.engine, experiment, cumulative)


def _require_same_definition(stored: ExperimentInfo, fields: Mapping[str, Any]) -> None:
    """Raise AlreadyExists naming each setting in which ``fields`` (checked values of a new
    experiment) define another experiment than ``stored``. Weights compare as shares of their
    total (1:1 is 0.5:0.5); the arms' order is not part of the definition."""

    def shares(weights: Mapping[str, float]) -> dict[str, float]:
        total = sum(weights.values())
        return {arm: round(weight / total, 12) for arm, weight in weights.items()}

    def grades(relevance: Mapping[str, float] | None) -> dict[str, float] | None:
        return None if relevance is None else {e: float(g) for e, g in relevance.items()}

    asked = {"arms": shares(fields["arms"]), "control": fields["control_arm"],
             "attribution_window": timedelta(microseconds=fields["attribution_window_us"]),
             "relevance": grades(fields["relevance"]),
             "unknown_events": fields["unknown_events"], "timezone": fields["timezone"],
             "cutoffs": tuple(fields["cutoffs"])}
    have = {"arms": shares({a.key: a.weight for a in stored.arms}), "control": stored.control,
            "attribution_window": stored.attribution_window,
            "relevance": grades(stored.relevance), "unknown_events": stored.unknown_events,
            "timezone": stored.timezone, "cutoffs": tuple(stored.cutoffs)}
    differences = [f"{name} is {have[name]!r}, not {asked[name]!r}"
                   for name in asked if asked[name] != have[name]]
    if differences:
        raise AlreadyExists(
            f"experiment {stored.key!r} already exists with other settings: "
            f"{'; '.join(differences)} (exist_ok returns an existing experiment only when it "
            "is the one asked for; choose another key for a new experiment)")


def _records(records: Any) -> tuple[Iterable[Mapping[str, Any]], bool]:
    if hasattr(records, "columns") and hasattr(records, "to_dict"):
        return frame_records(records)
    if isinstance(records, Mapping):
        raise ValidationError("expected many records (a DataFrame or an iterable of dicts), "
                              "got one dict: use log_impression / log_interaction for one")
    if isinstance(records, str | bytes) or not hasattr(records, "__iter__"):
        raise ValidationError("expected many records (a DataFrame or an iterable of dicts), "
                              f"got {type(records).__name__}")
    return records, False


def _single(result: IngestResult, what: str) -> IngestResult:
    if result.rejected:
        rejection = result.rejected[0]
        raise ValidationError(rejection.reason, field=rejection.field, record_id=rejection.id)
    if result.conflict_ids:
        raise ConflictError(what, result.conflict_ids)
    return result
