"""Experiment registry: create, read and list experiments with their arms.

Functions take a Connection and return frozen dataclasses; ORM rows stay here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from tracker.errors import AlreadyExists, NotFound
from tracker.store import results
from tracker.store.models import Arm, CatalogItem, Experiment, PlanChange

_CATALOG_BATCH = 10_000  # catalog rows per INSERT


@dataclass(frozen=True)
class ArmInfo:
    key: str
    weight: float
    id: int


@dataclass(frozen=True)
class Roles:
    """The metric roles declared on an experiment.

    ``primary``: the success metrics, by name (``"ndcg@10"``, ``"song_clicks"``), in the
    order declared; the multiple-comparison correction covers them. ``guardrails``: metric
    name -> the relative loss it tolerates (0.05 = a 5 % loss), each judged by a one-sided
    non-inferiority test. Every other metric is secondary. A name is never both primary and
    guardrail (:func:`tracker.ingest.validate.check_roles` enforces it).
    """

    primary: tuple[str, ...] = ()
    guardrails: dict[str, float] = field(default_factory=dict)

    def role(self, name: str) -> str:
        """``"primary"``, ``"guardrail"`` or ``"secondary"`` for the metric ``name``."""
        if name in self.primary:
            return "primary"
        return "guardrail" if name in self.guardrails else "secondary"

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON document (and the ``roles`` of :meth:`ExperimentInfo.to_dict`)."""
        return {"primary": list(self.primary), "guardrails": dict(self.guardrails)}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Roles:
        return cls(tuple(document.get("primary", ())),
                   {name: float(loss) for name, loss in document.get("guardrails", {}).items()})


INTERVAL_MODES = ("fixed_horizon", "sequential")
CORRECTIONS = ("holm", "bh")


@dataclass(frozen=True)
class AnalysisPlan:
    """How an experiment's decision is taken, pinned before its data is seen: ``intervals``
    (``"fixed_horizon"``, or ``"sequential"``: always-valid, for daily looks), ``cuped`` (the
    comparisons regression-adjusted on pre-exposure behaviour), ``correction`` over the
    primaries (``"holm"`` or ``"bh"``) and ``target_effect`` (the relative effect each primary
    must be able to detect; 0.05 = 5 %). The planned end is the experiment's ``ends_at``.

    An experiment stored without a plan has these defaults, the report's defaults before plans
    existed (:data:`tracker.stats.decision.DEFAULT_TARGET_EFFECT` is the same 5 %: a test
    holds the two together). :func:`tracker.ingest.experiments.check_plan` checks values.
    """

    intervals: str = "fixed_horizon"
    cuped: bool = True
    correction: str = "holm"
    target_effect: float = 0.05

    def to_dict(self) -> dict[str, Any]:
        return {"intervals": self.intervals, "cuped": self.cuped,
                "correction": self.correction, "target_effect": self.target_effect}

    @classmethod
    def from_dict(cls, document: dict[str, Any] | None) -> AnalysisPlan:
        if not document:
            return cls()
        default = cls()
        return cls(str(document.get("intervals", default.intervals)),
                   bool(document.get("cuped", default.cuped)),
                   str(document.get("correction", default.correction)),
                   float(document.get("target_effect", default.target_effect)))

    def describe(self) -> str:
        """One line, as the report and the dashboard print it."""
        mode = "always-valid (sequential)" if self.intervals == "sequential" else "fixed-horizon"
        return (f"{mode} intervals, CUPED {'on' if self.cuped else 'off'}, "
                f"{'Holm' if self.correction == 'holm' else 'Benjamini-Hochberg'} correction, "
                f"target effect {self.target_effect:.1%}")


SEGMENT_KINDS = ("user", "list")
BUILT_IN_SEGMENTS = {
    "cohort": "new to the product at first exposure (no pre-period interactions) or returning",
    "activity": "tercile of pre-period engagement: the user's interactions in the "
                "cuped_days before first exposure (CUPED's pre_interactions)",
}
"""The user dimensions every experiment may declare by name; any other name is a key of
the impressions' ``context``."""
DEFAULT_MAX_LEVELS = 20


@dataclass(frozen=True)
class Segment:
    """A dimension results are sliced by. ``kind``: ``"user"`` (a user's slice is their
    value at their first exposure: slices partition the users) or ``"list"`` (a served
    list's own value: a user counts in every slice they were served in). ``name``: one of
    :data:`BUILT_IN_SEGMENTS` (user dimensions), or a key of the impressions' ``context``.
    Values beyond the ``max_levels`` most frequent fold into ``(other)``; a list without
    the key is ``(none)``. :func:`tracker.ingest.experiments.check_segments` checks them."""

    name: str
    kind: str = "user"
    max_levels: int = DEFAULT_MAX_LEVELS

    @property
    def built_in(self) -> bool:
        return self.name in BUILT_IN_SEGMENTS

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "max_levels": self.max_levels}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Segment:
        return cls(str(document["name"]), str(document.get("kind", "user")),
                   int(document.get("max_levels", DEFAULT_MAX_LEVELS)))

    def describe(self) -> str:
        """``device (user dimension, context key, top 20 levels)``."""
        source = "built in" if self.built_in else "context key"
        return f"{self.name} ({self.kind} dimension, {source}, top {self.max_levels} levels)"


@dataclass(frozen=True)
class PlanRecord:
    """One entry of an experiment's plan history: the plan and planned end from ``changed_at``
    on."""

    changed_at: datetime
    plan: AnalysisPlan
    planned_end: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {"changed_at": self.changed_at.isoformat(), **self.plan.to_dict(),
                "planned_end": self.planned_end.isoformat() if self.planned_end else None}


@dataclass(frozen=True)
class ExperimentInfo:
    """An experiment as stored. ``relevance`` maps event types to grades (None: any event is
    grade 1); ``cutoffs`` are the k values the rollup reports; ``roles`` the declared metric
    roles (None: none declared, the report's defaults apply); ``cuped_days`` the days of
    pre-exposure history CUPED's covariates cover (0: no adjustment); ``segments`` the
    declared dimensions results are sliced by, in the order declared."""

    id: int
    key: str
    name: str
    description: str
    status: str
    starts_at: datetime | None
    ends_at: datetime | None
    control: str
    arms: tuple[ArmInfo, ...]
    attribution_window: timedelta
    relevance: dict[str, float] | None
    unknown_events: str
    timezone: str
    cutoffs: tuple[int, ...]
    created_at: datetime
    roles: Roles | None = None
    cuped_days: int = 14
    plan: AnalysisPlan = field(default_factory=AnalysisPlan)
    segments: tuple[Segment, ...] = ()
    # the rollup's, not stored here: per list dimension (by name) the values that keep a
    # slice, as the running rollup found them (tracker.rollup.levels); () outside a run
    levels: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def planned_end(self) -> datetime | None:
        """The end the plan was made for: ``ends_at``."""
        return self.ends_at

    def arm(self, key: str) -> ArmInfo:
        for arm in self.arms:
            if arm.key == key:
                return arm
        raise NotFound(f"experiment {self.key!r} has no arm {key!r} "
                       f"(arms: {', '.join(a.key for a in self.arms)})")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (times as ISO 8601 UTC, the window in seconds)."""
        return {
            "key": self.key, "name": self.name, "description": self.description,
            "status": self.status,
            "starts_at": self.starts_at.isoformat() if self.starts_at else None,
            "ends_at": self.ends_at.isoformat() if self.ends_at else None,
            "control": self.control,
            "arms": [{"key": a.key, "weight": a.weight} for a in self.arms],
            "attribution_window_seconds": self.attribution_window.total_seconds(),
            "relevance": self.relevance, "unknown_events": self.unknown_events,
            "timezone": self.timezone, "cutoffs": list(self.cutoffs),
            "created_at": self.created_at.isoformat(),
            "roles": self.roles.to_dict() if self.roles is not None else None,
            "cuped_days": self.cuped_days, "plan": self.plan.to_dict(),
            "segments": [segment.to_dict() for segment in self.segments],
        }


def insert_experiment(conn: sa.Connection, *, arms: dict[str, float], **fields: Any) -> int:
    """Store a new experiment and its arms (fields already validated); returns its id."""
    exists = conn.execute(sa.select(Experiment.id).where(Experiment.key == fields["key"]))
    if exists.first() is not None:
        raise AlreadyExists(f"experiment {fields['key']!r} already exists")
    if fields.get("roles", 0) is None:
        fields["roles"] = sa.null()  # SQL NULL, as for experiments stored before roles existed
    if not fields.get("segments", 0):
        fields["segments"] = sa.null()  # none declared: NULL, as before segments existed
    fields.setdefault("plan", AnalysisPlan().to_dict())
    experiment_id = conn.execute(
        sa.insert(Experiment).values(**fields).returning(Experiment.id)).scalar_one()
    conn.execute(sa.insert(Arm), [
        {"experiment_id": experiment_id, "key": key, "weight": weight}
        for key, weight in arms.items()
    ])
    _record_plan(conn, experiment_id, fields["created_at"])
    return experiment_id


def _record_plan(conn: sa.Connection, experiment_id: int, at: Any) -> None:
    """Append the experiment's current plan and planned end to its history, dated ``at``
    (a datetime or epoch microseconds)."""
    plan, ends_at = conn.execute(sa.select(Experiment.plan, Experiment.ends_at)
                                 .where(Experiment.id == experiment_id)).one()
    document = {**AnalysisPlan.from_dict(plan).to_dict(),
                "planned_end": ends_at.isoformat() if ends_at else None}
    conn.execute(sa.insert(PlanChange).values(experiment_id=experiment_id, changed_at=at,
                                              plan=document))


def plan_history(conn: sa.Connection, key: str) -> list[PlanRecord]:
    """Every plan experiment ``key`` had, oldest first (creation, then each change)."""
    info = get_experiment(conn, key)
    rows = conn.execute(sa.select(PlanChange.changed_at, PlanChange.plan)
                        .where(PlanChange.experiment_id == info.id)
                        .order_by(PlanChange.id))
    return [PlanRecord(at, AnalysisPlan.from_dict(doc),
                       datetime.fromisoformat(doc["planned_end"]) if doc.get("planned_end")
                       else None) for at, doc in rows]


def rebuild_asked(info: ExperimentInfo, values: dict[str, Any]) -> str | None:
    """What in ``values`` (checked changes of experiment ``info``) makes the next rollup
    recompute every day, in words (None: nothing): a new ``cuped_days``, or other
    dimensions (the same ones in another order change no result)."""
    if "cuped_days" in values:
        return f"a new cuped_days ({values['cuped_days']})"
    if "segments" in values and {Segment.from_dict(d) for d in values["segments"] or ()} \
            != set(info.segments):
        return "new segments"
    return None


def update_experiment(conn: sa.Connection, key: str, values: dict[str, Any],
                      now: datetime | None = None) -> None:
    """Change the given columns of experiment ``key`` (values already validated; a
    ``"roles"`` of None clears the roles; a change :func:`rebuild_asked` names resets the
    rollup state, so the next run recomputes every day with the new covariates or slices;
    a new ``"plan"`` or ``"ends_at"`` is recorded in the plan history at ``now``). Raises
    NotFound for an unknown key."""
    info = get_experiment(conn, key)  # NotFound for an unknown key, changes or not
    if not values:
        return
    rebuild = rebuild_asked(info, values)
    for name in ("roles", "segments"):
        if name in values and not values[name]:
            values = {**values, name: sa.null()}
    conn.execute(sa.update(Experiment).where(Experiment.id == info.id).values(**values))
    if rebuild is not None:
        results.reset_state(conn, info.id, declaration=True)
    if "plan" in values or "ends_at" in values:
        if now is None:
            raise ValueError("a change of the plan or the planned end needs its time (now)")
        _record_plan(conn, info.id, now)


def _load(conn: sa.Connection, where) -> list[ExperimentInfo]:
    rows = conn.execute(sa.select(Experiment.__table__).where(where)
                        .order_by(Experiment.id)).all()
    if not rows:
        return []
    arms_by_experiment: dict[int, list[ArmInfo]] = {}
    arm_rows = conn.execute(sa.select(Arm.experiment_id, Arm.key, Arm.weight, Arm.id)
                            .where(Arm.experiment_id.in_([e.id for e in rows]))
                            .order_by(Arm.id))
    for experiment_id, key, weight, arm_id in arm_rows:
        arms_by_experiment.setdefault(experiment_id, []).append(ArmInfo(key, weight, arm_id))
    return [
        ExperimentInfo(
            id=e.id, key=e.key, name=e.name, description=e.description, status=e.status,
            starts_at=e.starts_at, ends_at=e.ends_at, control=e.control_arm,
            arms=tuple(arms_by_experiment.get(e.id, ())),
            attribution_window=timedelta(microseconds=e.attribution_window_us),
            relevance=dict(e.relevance) if e.relevance is not None else None,
            unknown_events=e.unknown_events, timezone=e.timezone,
            cutoffs=tuple(e.cutoffs), created_at=e.created_at,
            roles=Roles.from_dict(e.roles) if e.roles is not None else None,
            cuped_days=e.cuped_days, plan=AnalysisPlan.from_dict(e.plan),
            segments=tuple(Segment.from_dict(d) for d in e.segments or ()),
        )
        for e in rows
    ]


def find_experiment(conn: sa.Connection, key: str) -> ExperimentInfo | None:
    """Experiment ``key``, or None when it is not stored."""
    found = _load(conn, Experiment.key == key)
    return found[0] if found else None


def get_experiment(conn: sa.Connection, key: str) -> ExperimentInfo:
    found = find_experiment(conn, key)
    if found is None:
        raise NotFound(f"unknown experiment {key!r} (create it first: "
                       "`tracker experiments create` or Tracker.create_experiment)")
    return found


def list_experiments(conn: sa.Connection, *,
                     include_archived: bool = True) -> list[ExperimentInfo]:
    """Every experiment, or (``include_archived=False``, the default lists) all but the
    archived ones."""
    return _load(conn, sa.true() if include_archived else Experiment.status != "archived")


def find_impression_experiments(conn: sa.Connection, impression_keys: list[str]) -> dict[str, int]:
    """impression key -> experiment id, for the keys that are stored."""
    from tracker.store.models import Impression

    found: dict[str, int] = {}
    for start in range(0, len(impression_keys), 5000):
        part = impression_keys[start:start + 5000]
        rows = conn.execute(sa.select(Impression.impression_key, Impression.experiment_id)
                            .where(Impression.impression_key.in_(part)))
        found.update({k: e for k, e in rows})
    return found


def replace_catalog(conn: sa.Connection, experiment_id: int, items: list[str]) -> None:
    """Make ``items`` (validated, distinct) the experiment's declared catalog, replacing the
    one before; ``[]`` removes it. The catalog enters the set metrics of every day, so the
    experiment's rollup state is forgotten: the next rollup recomputes all its days (its
    results stay readable until then)."""
    conn.execute(sa.delete(CatalogItem).where(CatalogItem.experiment_id == experiment_id))
    for start in range(0, len(items), _CATALOG_BATCH):
        conn.execute(sa.insert(CatalogItem), [
            {"experiment_id": experiment_id, "item_id": item}
            for item in items[start:start + _CATALOG_BATCH]
        ])
    # the rollup state is reset and its generation bumped (not deleted): a rollup running
    # now then does not record its watermarks over the reset
    results.reset_state(conn, experiment_id, declaration=True)


def catalog(conn: sa.Connection, experiment_id: int) -> list[str]:
    """The experiment's declared catalog, sorted ([] when none is declared)."""
    return list(conn.execute(sa.select(CatalogItem.item_id)
                             .where(CatalogItem.experiment_id == experiment_id)
                             .order_by(CatalogItem.item_id)).scalars())
