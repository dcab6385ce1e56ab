"""The rules for experiments: a new experiment's settings, metric roles, later changes.

Each function returns checked column values or raises
:class:`~tracker.errors.ValidationError` naming the field, what was wrong and what is
accepted. The store (:mod:`tracker.store.experiments`) writes what these return.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NoReturn
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from tracker.errors import ValidationError
from tracker.metrics.registry import parse_metric
from tracker.store.experiments import (
    BUILT_IN_SEGMENTS,
    CORRECTIONS,
    DEFAULT_MAX_LEVELS,
    INTERVAL_MODES,
    SEGMENT_KINDS,
    AnalysisPlan,
    ExperimentInfo,
    Roles,
    Segment,
)
from tracker.store.models import EXPERIMENT_STATUSES, KEY_LENGTH, UNKNOWN_EVENT_POLICIES
from tracker.store.types import to_micros

_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


def experiment_fields(*, key: str, arms: Mapping[str, float], control: str | None,
                      attribution_window: timedelta | float | int,
                      relevance: Mapping[str, float] | None, name: str | None,
                      description: str, status: str, starts_at: datetime | None,
                      ends_at: datetime | None, timezone: str, cutoffs: Any,
                      unknown_events: str, max_items: int, now_us: int,
                      cuped_days: Any = 14, plan: AnalysisPlan | None = None,
                      segments: Any = (), max_levels: Any = None) -> dict[str, Any]:
    """Checked column values for a new experiment; raises ValidationError naming the field."""
    if not _is_key(key):
        _fail("key", f"{key!r} is not a valid experiment key: 1-{KEY_LENGTH} characters of "
                     "letters, digits, '.', '_', ':', '-', starting with a letter or digit")
    control = _check_arms(arms, control)
    window_us = _check_window(attribution_window)
    relevance = _check_relevance(relevance)
    _check_choice("status", status, EXPERIMENT_STATUSES)
    _check_choice("unknown_events", unknown_events, UNKNOWN_EVENT_POLICIES)
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        _fail("timezone", f"{timezone!r} is not an IANA time zone name (e.g. 'Europe/Berlin')")
    cutoff_list = _check_cutoffs(cutoffs, max_items)
    cuped = check_cuped_days(cuped_days)
    start_us = to_micros(starts_at) if starts_at is not None else None
    end_us = to_micros(ends_at) if ends_at is not None else None
    if start_us is not None and end_us is not None and end_us <= start_us:
        _fail("ends_at", "must be after starts_at")
    if name is not None and (not isinstance(name, str) or len(name) > KEY_LENGTH):
        _fail("name", f"must be a string of at most {KEY_LENGTH} characters")
    return {
        "key": key, "name": name or key, "description": description or "", "status": status,
        "starts_at": start_us, "ends_at": end_us, "control_arm": control,
        "attribution_window_us": window_us, "relevance": relevance,
        "unknown_events": unknown_events, "timezone": timezone, "cutoffs": cutoff_list,
        "cuped_days": cuped, "created_at": now_us, "arms": {a: float(w) for a, w in arms.items()},
        "plan": check_plan(plan or AnalysisPlan()).to_dict(),
        "segments": [segment.to_dict() for segment in _with_window(
            check_segments(segments, max_levels=max_levels), cuped)],
    }


def _with_window(segments: tuple[Segment, ...], cuped_days: int,
                 field: str = "segments") -> tuple[Segment, ...]:
    """``segments``, refused (naming ``field``, the setting that changed) when a built-in
    dimension reads the pre-period and ``cuped_days`` leaves none: every user would be
    ``new`` (``cohort``) or in one tercile (``activity``), a slice that says nothing."""
    built_in = [s.name for s in segments if s.name in BUILT_IN_SEGMENTS]
    if built_in and cuped_days == 0:
        names = " and ".join(built_in)
        _fail(field, f"{names} {'read' if len(built_in) > 1 else 'reads'} the user's "
                     "interactions in the cuped_days before first exposure, and cuped_days "
                     "is 0: every user would fall in one slice; set cuped_days (e.g. 14) or "
                     f"leave {names} out")
    return segments


def _fail(field: str, reason: str) -> NoReturn:
    raise ValidationError(reason, field=field)


def _is_key(value: Any) -> bool:
    """An experiment or arm key: 1-KEY_LENGTH letters, digits, '.', '_', ':', '-', starting
    with a letter or digit."""
    return isinstance(value, str) and bool(_KEY_RE.match(value)) and len(value) <= KEY_LENGTH


def _is_finite_number(value: Any) -> bool:
    """A finite number (not a bool); the callers say which range."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value))


def _check_choice(field: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        _fail(field, f"{value!r} is not one of {', '.join(choices)}")


def _check_arms(arms: Any, control: str | None) -> str:
    """The control arm (the first arm when not given) of valid arms with weights > 0."""
    if not isinstance(arms, Mapping) or len(arms) < 2:
        _fail("arms", "an experiment needs at least two arms, e.g. {'control': 0.5, 'new': 0.5}")
    for arm, weight in arms.items():
        if not _is_key(arm):
            _fail("arms", f"{arm!r} is not a valid arm key (letters, digits, '.', '_', ':', '-')")
        if not _is_finite_number(weight) or weight <= 0:
            _fail("arms", f"arm {arm!r} has weight {weight!r}; weights must be numbers > 0")
    if control is None:
        control = next(iter(arms))
    if control not in arms:
        _fail("control", f"control arm {control!r} is not one of the arms ({', '.join(arms)})")
    return control


def _check_window(window: Any) -> int:
    """The attribution window in microseconds: a timedelta or a number of seconds, > 0."""
    if isinstance(window, timedelta):
        window_us = window // timedelta(microseconds=1)
    elif isinstance(window, (int, float)) and not isinstance(window, bool):
        window_us = int(window * 1_000_000)
    else:
        _fail("attribution_window", "must be a timedelta or a number of seconds")
    if window_us <= 0:
        _fail("attribution_window", "must be positive")
    return window_us


def _check_relevance(relevance: Any) -> dict[str, float] | None:
    """Event types (1-64 characters) to grades >= 0, or None (every event has grade 1)."""
    if relevance is None:
        return None
    if not isinstance(relevance, Mapping) or not relevance:
        _fail("relevance", "must map event types to grades, e.g. {'click': 1, 'save': 2}")
    relevance = dict(relevance)
    for event, grade in relevance.items():
        if not isinstance(event, str) or not event or len(event) > 64:
            _fail("relevance", f"event type {event!r} must be a string of 1-64 characters")
        if not _is_finite_number(grade) or grade < 0:
            _fail("relevance", f"grade of {event!r} is {grade!r}; grades are numbers >= 0")
    return relevance


MAX_CUPED_DAYS = 365


def check_cuped_days(days: Any) -> int:
    """The days of pre-exposure history CUPED's covariates cover: a whole number from 0 (no
    adjustment) to :data:`MAX_CUPED_DAYS`."""
    if isinstance(days, bool) or not isinstance(days, (int, np.integer)) \
            or not 0 <= days <= MAX_CUPED_DAYS:
        _fail("cuped_days", f"{days!r}: expected a whole number of days from 0 (no CUPED "
                            f"adjustment) to {MAX_CUPED_DAYS}, e.g. 14")
    return int(days)


def _check_cutoffs(cutoffs: Any, max_items: int) -> list[int]:
    """Distinct cutoffs in increasing order, each between 1 and ``max_items``."""
    try:
        cutoff_list = sorted({int(k) for k in cutoffs})
    except (TypeError, ValueError):
        _fail("cutoffs", "must be a list of whole numbers, e.g. [5, 10, 20]")
    if not cutoff_list or cutoff_list[0] < 1 or cutoff_list[-1] > max_items:
        _fail("cutoffs", f"need at least one cutoff, each between 1 and {max_items}")
    return cutoff_list


# ---------------------------------------------------------------------------- plan

def check_plan(plan: Any, **changes: Any) -> AnalysisPlan:
    """``plan`` (an :class:`AnalysisPlan`) with ``changes`` (None: unchanged), checked: the
    interval mode one of :data:`INTERVAL_MODES`, the correction one of :data:`CORRECTIONS`,
    CUPED a bool, the target effect a relative effect in (0, 1]."""
    if not isinstance(plan, AnalysisPlan):
        _fail("plan", f"expected an AnalysisPlan, got {type(plan).__name__}")
    values = {**plan.to_dict(), **{k: v for k, v in changes.items() if v is not None}}
    if values["intervals"] not in INTERVAL_MODES:
        _fail("intervals", f"{values['intervals']!r} is not one of {', '.join(INTERVAL_MODES)}")
    if values["correction"] not in CORRECTIONS:
        _fail("correction", f"{values['correction']!r} is not one of {', '.join(CORRECTIONS)}")
    if not isinstance(values["cuped"], bool):
        _fail("cuped", f"{values['cuped']!r}: expected True or False")
    effect = values["target_effect"]
    if not _is_finite_number(effect) or not 0 < effect <= 1:
        _fail("target_effect", f"{effect!r}: expected a relative effect in (0, 1], e.g. 0.05 "
                               "for 5 %")
    return AnalysisPlan(values["intervals"], values["cuped"], values["correction"],
                        float(effect))


# ---------------------------------------------------------------------------- roles

MAX_SEGMENTS = 5
"""Dimensions per experiment: each adds its slices' rows to every view of the rollup."""
MAX_LEVELS = 100
_SEGMENT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def check_segments(segments: Any, *, max_levels: Any = None) -> tuple[Segment, ...]:
    """The declared dimensions, checked: each a :class:`Segment` or its ``NAME[:user|:list]``
    text (``"device"``, ``"surface:list"``; ``max_levels`` sets their levels, default
    :data:`~tracker.store.experiments.DEFAULT_MAX_LEVELS`). A name once, at most
    :data:`MAX_SEGMENTS`; a built-in dimension (``cohort``, ``activity``) describes the user
    and cannot be a list dimension; any other name is a context key of 1-64 letters,
    digits, ``_`` or ``-``."""
    if not isinstance(segments, (list, tuple)):  # ordered: a set's order is the hash seed's
        _fail("segments", f"expected a list of dimensions (e.g. ['device', 'surface:list']), "
                          f"got {segments!r}")
    levels = DEFAULT_MAX_LEVELS if max_levels is None else _check_levels(max_levels)
    if max_levels is not None and not segments:
        _fail("max_levels", "no dimension is declared to set the levels of; declare them "
                            "with segments (--segment)")
    out: list[Segment] = []
    for given in segments:
        segment = _segment(given, levels)
        if any(s.name == segment.name for s in out):
            _fail("segments", f"{segment.name!r} is declared twice")
        out.append(segment)
    if len(out) > MAX_SEGMENTS:
        _fail("segments", f"{len(out)} dimensions declared; at most {MAX_SEGMENTS} (each "
                          "adds its slices to every result the rollup keeps)")
    return tuple(out)


def _check_levels(levels: Any) -> int:
    if isinstance(levels, bool) or not isinstance(levels, (int, np.integer)) or \
            not 1 <= levels <= MAX_LEVELS:
        _fail("max_levels", f"{levels!r}: expected a whole number of slices from 1 to "
                            f"{MAX_LEVELS} (the values beyond the most frequent fold into "
                            "'(other)')")
    return int(levels)


def _segment(given: Any, levels: int) -> Segment:
    if isinstance(given, Segment):
        name, kind = given.name, given.kind
        try:
            levels = _check_levels(given.max_levels)
        except ValidationError as error:
            _fail("segments", f"{given!r}: {error.reason}")
    elif isinstance(given, str):
        name, _, kind = given.partition(":")
        kind = kind or "user"
    else:
        _fail("segments", f"{given!r}: a dimension is NAME, NAME:user or NAME:list")
    if not isinstance(name, str) or not _SEGMENT_NAME_RE.fullmatch(name):
        _fail("segments", f"{given!r}: a dimension's name is a built-in dimension "
                          f"({', '.join(BUILT_IN_SEGMENTS)}) or a context key of 1-64 "
                          "letters, digits, '_' or '-' (starting with a letter or digit)")
    if kind not in SEGMENT_KINDS:
        _fail("segments", f"{given!r}: the kind after ':' is 'user' (the user's value at "
                          "first exposure) or 'list' (each served list's own value)")
    if name in BUILT_IN_SEGMENTS and kind != "user":
        _fail("segments", f"{name!r} is built in and describes the user at first exposure "
                          f"({BUILT_IN_SEGMENTS[name]}): it cannot be a list dimension")
    return Segment(str(name), str(kind), levels)


def check_role_metric(name: Any, field: str, cutoffs: Sequence[int]) -> str:
    """The canonical name of a metric given a role: a metric of the registry
    (:func:`tracker.metrics.registry.parse_metric`), written ``METRIC@K`` for those with a
    cutoff and ``METRIC`` for the others, whose k is one of the experiment's ``cutoffs``."""
    try:
        parsed = parse_metric(name)
    except ValueError as exc:
        raise ValidationError(f"{exc}; this experiment's cutoffs: "
                              f"{', '.join(map(str, cutoffs))}", field=field) from None
    if parsed.k is not None and parsed.k not in cutoffs:
        shown = ", ".join(f"{parsed.metric}@{k}" for k in cutoffs)
        raise ValidationError(f"{name!r}: k = {parsed.k} is not one of the experiment's "
                              f"cutoffs; accepted: {shown}", field=field)
    return str(parsed)


def check_loss(name: str, loss: Any) -> float:
    """A guardrail's tolerated relative loss: a number in [0, 1) (0.05 tolerates a 5 % loss;
    0 tolerates none)."""
    if (isinstance(loss, bool) or not isinstance(loss, (int, float, np.floating))
            or not math.isfinite(loss) or not 0 <= loss < 1):
        raise ValidationError(f"guardrail {name!r} tolerates a loss of {loss!r}; a loss is a "
                              "relative share in [0, 1), e.g. 0.05 for 5 %", field="guardrails")
    return float(loss)


def check_roles(*, primary: Iterable[str], guardrails: Mapping[str, Any],
                cutoffs: Sequence[int]) -> Roles | None:
    """Checked metric roles of an experiment with ``cutoffs``; None when both are empty (no
    roles: the report's defaults apply). Names are canonicalised and a primary named twice is
    kept once; a metric is never both primary and guardrail. Raises ValidationError naming
    the bad value and what is accepted."""
    if isinstance(primary, (str, bytes, Mapping)):
        raise ValidationError(f"primary metrics must be a list of names such as "
                              f"['ndcg@10'], got {primary!r}", field="primary")
    if not isinstance(guardrails, Mapping):
        raise ValidationError(f"guardrails must map metric names to tolerated losses, e.g. "
                              f"{{'song_clicks': 0.05}}, got {guardrails!r}", field="guardrails")
    names = tuple(dict.fromkeys(check_role_metric(n, "primary", cutoffs) for n in primary))
    guards: dict[str, float] = {}
    for name, loss in guardrails.items():
        canonical = check_role_metric(name, "guardrails", cutoffs)
        if canonical in guards:
            raise ValidationError(f"guardrail {canonical!r} is given twice", field="guardrails")
        guards[canonical] = check_loss(canonical, loss)
    both = [n for n in names if n in guards]
    if both:
        raise ValidationError(f"{', '.join(map(repr, both))} cannot be both primary and "
                              "guardrail: choose one role per metric", field="guardrails")
    if not names and not guards:
        return None
    return Roles(names, guards)


def experiment_update_fields(info: ExperimentInfo, *, primary: Iterable[str] | None,
                             guardrails: Mapping[str, Any] | None, name: str | None,
                             description: str | None,
                             ends_at: datetime | str | None,
                             cuped_days: Any = None, intervals: str | None = None,
                             cuped: bool | None = None, correction: str | None = None,
                             target_effect: float | None = None, segments: Any = None,
                             max_levels: Any = None) -> dict[str, Any]:
    """Checked column values that change experiment ``info``; None leaves a setting as it
    is. ``primary`` and ``guardrails`` each replace that role's list (``[]`` / ``{}`` empties
    it; both empty: no roles). A new ``cuped_days`` makes the next rollup recompute every
    day (the covariates change). Arms, window, relevance, cutoffs and time zone are not
    offered: changing them would change what the stored results mean. ``intervals``,
    ``cuped``, ``correction`` and ``target_effect`` change the analysis plan (``"plan"``,
    returned only when it differs). ``segments`` replaces the declared dimensions (``[]``:
    none); ``max_levels`` alone sets the levels of those declared (returned, as
    ``"segments"``, only when they differ: the next rollup then recomputes every day)."""
    values: dict[str, Any] = {}
    plan = check_plan(info.plan, intervals=intervals, cuped=cuped, correction=correction,
                      target_effect=target_effect)
    if plan != info.plan:
        values["plan"] = plan.to_dict()
    if primary is not None or guardrails is not None:
        current = info.roles or Roles()
        roles = check_roles(
            primary=current.primary if primary is None else primary,
            guardrails=current.guardrails if guardrails is None else guardrails,
            cutoffs=info.cutoffs)
        values["roles"] = roles.to_dict() if roles is not None else None
    if name is not None:
        if not isinstance(name, str) or not name or len(name) > KEY_LENGTH:
            raise ValidationError(f"{name!r}: a name is a string of 1-{KEY_LENGTH} characters",
                                  field="name")
        values["name"] = name
    if description is not None:
        if not isinstance(description, str):
            raise ValidationError(f"must be text, got {type(description).__name__}",
                                  field="description")
        values["description"] = description
    if ends_at is not None and _check_end(info, ends_at) != (
            None if info.ends_at is None else to_micros(info.ends_at)):
        values["ends_at"] = _check_end(info, ends_at)
    if cuped_days is not None and check_cuped_days(cuped_days) != info.cuped_days:
        values["cuped_days"] = check_cuped_days(cuped_days)
    if segments is not None or max_levels is not None:
        values.update(_segments_update(info, segments, max_levels))
    if "segments" in values or "cuped_days" in values:
        _with_window(tuple(Segment.from_dict(s) for s in values["segments"])
                     if "segments" in values else info.segments,
                     values.get("cuped_days", info.cuped_days),
                     "segments" if "segments" in values else "cuped_days")
    return values


def _segments_update(info: ExperimentInfo, segments: Any, max_levels: Any) -> dict[str, Any]:
    """``{"segments": ...}`` when the declared dimensions change (else ``{}``): ``segments``
    replaces them (a name declared before keeps its levels unless ``max_levels`` or a
    :class:`Segment` gives others); ``max_levels`` alone sets the levels of those declared.
    A new order alone is a change too (stored; no rollup recomputes for it:
    :func:`tracker.store.experiments.rebuild_asked`)."""
    if segments is None:
        if not info.segments:
            _fail("max_levels", "the experiment declares no dimension to set the levels of; "
                                "declare them with segments (--segment)")
        declared = tuple(Segment(s.name, s.kind, _check_levels(max_levels))
                         for s in info.segments)
    else:
        declared = check_segments(segments, max_levels=max_levels)
        if max_levels is None:
            before = {s.name: s.max_levels for s in info.segments}
            declared = tuple(
                s if isinstance(given, Segment) or s.name not in before
                else Segment(s.name, s.kind, before[s.name])
                for s, given in zip(declared, segments, strict=True))
    if declared == info.segments:
        return {}
    return {"segments": [segment.to_dict() for segment in declared]}


def _check_end(info: ExperimentInfo, ends_at: datetime | str) -> int:
    """Microseconds of a new end instant (naive = UTC), after the experiment's start."""
    if isinstance(ends_at, str):
        try:
            ends_at = datetime.fromisoformat(ends_at)
        except ValueError:
            raise ValidationError(f"{ends_at!r} is not an ISO 8601 date-time, e.g. "
                                  "2026-12-01T00:00:00Z", field="ends_at") from None
    if not isinstance(ends_at, datetime):
        raise ValidationError(f"must be a datetime or an ISO 8601 string, got "
                              f"{type(ends_at).__name__}", field="ends_at")
    end_us = to_micros(ends_at)
    if info.starts_at is not None and end_us <= to_micros(info.starts_at):
        raise ValidationError(f"{ends_at.isoformat()} must be after the experiment's start "
                              f"({info.starts_at.isoformat()})", field="ends_at")
    return end_us
