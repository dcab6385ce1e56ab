"""The levels of an experiment's dimensions: which values keep a slice of their own.

A dimension (a :class:`~tracker.store.experiments.Segment`) slices every served list by a
value (:func:`value_sql`): a **list** dimension by the list's own ``context`` value at its key
(:func:`~tracker.rollup.queries.context_value`); a **user** dimension by its user's value
at their first exposure, the same for each of their lists, so that its slices partition the
users: a context key's value in the first exposure's ``context``
(:func:`~tracker.rollup.user_queries.first_exposure_value`), or the built-in ``cohort``
(:func:`~tracker.rollup.user_queries.cohort_value`), or the built-in ``activity``: the
terciles of the users' pre-period interactions (:func:`activity_levels`,
:func:`~tracker.rollup.user_queries.activity_value`).

The ``max_levels`` values served most (a list dimension: in the most lists; a user
dimension: to the most users, at their first exposure) over every day keep a slice each
(ties: the smaller value first); the other values fold into :data:`OTHER`, and lists
without the key are :data:`NONE`. ``cohort`` has its two levels, always; ``activity``'s
come from the users per count of pre-period interactions (at first exposure, per day).

Counting every day's lists again each night would cost what the history holds, so each
day's counts are stored (``rollup_slice_count``) when the run reads the day whole (new
lists, an erasure, a rebuild) and the levels come from their sum. A day keeps the
:data:`KEPT_PER_DAY` × ``max_levels`` values most served that day and counts the rest as
:data:`OTHER` (a key with a value per request stays a few rows a day). The levels the
stored results were computed with are kept beside them (``rollup_state.levels``): a run
whose counts give other levels recomputes every day, so that no view mixes two sets of
slices, and any order of the same logs gives the same levels (unless logs of days with
results expired: the levels are then frozen, :func:`refresh`). A value longer than
:data:`LONGEST` never keeps a slice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import date

import sqlalchemy as sa

from tracker.rollup import queries, retention, user_queries
from tracker.rollup.days import DAY, day_bounds
from tracker.store import results
from tracker.store.db import transaction
from tracker.store.experiments import ExperimentInfo, Segment

NONE = "(none)"
"""The slice of the lists without a value for the dimension's key."""

OTHER = "(other)"
"""The slice of the values beyond the dimension's ``max_levels`` most frequent."""

KEPT_PER_DAY = 10
"""A day's counts keep this many times ``max_levels`` values; the rest count as OTHER."""

LONGEST = 200
"""A value of more characters never keeps a slice: it counts as OTHER. A slice is named by
its value in the results' primary keys, whose index entries PostgreSQL limits to 2,704
bytes; a label longer than this is an id or a payload, not a segment."""

Levels = dict[str, tuple[str, ...]]
"""Per dimension (by name), the values that keep a slice: a context key's most frequent,
in sorted order; ``cohort``'s two; ``activity``'s terciles from the lowest."""


COHORT = "cohort"
ACTIVITY = "activity"
ACTIVITY_CAP = 10_000
"""Pre-period interactions counted up to this many: more count as this many."""


def pre_period_us(info: ExperimentInfo) -> int:
    """The window before a user's first exposure that ``cohort`` and ``activity`` read
    (CUPED's ``cuped_days``), in microseconds."""
    return info.cuped_days * DAY


def _built_in(dimension: Segment, name: str) -> bool:
    return dimension.kind == "user" and dimension.name == name


def sliced(info: ExperimentInfo) -> list[Segment]:
    """The experiment's dimensions the rollup slices by, by name (the order declared
    changes nothing)."""
    return sorted(info.segments, key=lambda s: s.name)


def closed(info: ExperimentInfo) -> frozenset[str]:
    """The dimensions whose every value is a level (``cohort``, ``activity``): no
    :data:`NONE` or :data:`OTHER` slice."""
    return frozenset(s.name for s in info.segments
                     if _built_in(s, COHORT) or _built_in(s, ACTIVITY))


Values = tuple[tuple[str, str], ...]
"""``(dimension, SQL of its value)`` pairs."""


def value_sql(info: ExperimentInfo, dialect: str) -> tuple[Values, Values]:
    """Per dimension with levels (``info.levels``), the SQL of its value: of a served list
    (``imp``) for the list dimensions (:func:`~tracker.rollup.queries.served_lists`'
    ``slices``), of a user (``u``) for the user dimensions
    (:func:`~tracker.rollup.user_queries.user_slices`')."""
    kinds = {s.name: s.kind for s in info.segments}
    window = pre_period_us(info)
    lists, users = [], []
    for name, values in info.levels:
        if kinds.get(name) == "list":
            lists.append((name, queries.context_value(dialect, name)))
        elif name == COHORT:
            users.append((name, user_queries.cohort_value(info.id, window)))
        elif name == ACTIVITY:
            floors = sorted((floor_of(v), v) for v in values)
            users.append((name, user_queries.activity_value(info.id, window, floors)))
        else:
            users.append((name, user_queries.first_exposure_value(dialect, name, info.id)))
    return tuple(lists), tuple(users)


def day_counts(conn: sa.Connection, info: ExperimentInfo, day: date) -> list[dict]:
    """``rollup_slice_count`` rows of one day: its lists per value of each list dimension,
    the users first exposed on it per value of each user dimension (``activity``: per
    count of pre-period interactions); a value longer than :data:`LONGEST` counts as
    :data:`OTHER`."""
    start, end = day_bounds(day, info.timezone)
    rows = []
    per_list = queries.context_counts(conn, info.id, start, end,
                                      [d.name for d in sliced(info) if d.kind == "list"])
    for dimension in sliced(info):
        if _built_in(dimension, COHORT):
            continue  # its levels are fixed
        if _built_in(dimension, ACTIVITY):
            found: dict[str, int] = {}
            for n, users in user_queries.activity_counts(conn, info.id, start, end,
                                                         pre_period_us(info)):
                value = str(min(n, ACTIVITY_CAP))
                found[value] = found.get(value, 0) + users
            rows += [{"day": day, "segment": dimension.name, "slice": value, "lists": users}
                     for value, users in found.items()]
            continue
        found_values = per_list[dimension.name] if dimension.kind == "list" else \
            user_queries.first_exposure_counts(conn, info.id, start, end, dimension.name)
        merged: dict[str, int] = {}
        for value, lists in found_values:
            key = NONE if value is None else OTHER if len(value) > LONGEST else value
            merged[key] = merged.get(key, 0) + lists
        ranked = sorted(merged.items(), key=lambda pair: (-pair[1], pair[0]))
        keep = KEPT_PER_DAY * dimension.max_levels
        counts = dict(ranked[:keep])
        rest = sum(lists for _, lists in ranked[keep:])
        if rest:
            counts[OTHER] = counts.get(OTHER, 0) + rest
        rows += [{"day": day, "segment": dimension.name, "slice": value, "lists": lists}
                 for value, lists in counts.items()]
    return rows


def activity_levels(users: dict[int, int]) -> tuple[str, ...]:
    """The slices of ``activity`` from the users per count of pre-period interactions:
    its terciles, each named by the counts it holds (``"0"``, ``"1-3"``, ``"4+"``; fewer
    when they tie, ``("0+",)`` without users).

    >>> activity_levels({0: 50, 1: 10, 2: 10, 3: 5, 7: 25})
    ('0', '1-2', '3+')
    >>> activity_levels({0: 90, 4: 10}), activity_levels({})
    (('0', '1+'), ('0+',))
    """
    total = sum(users.values())
    floors, seen = [0], 0
    for count in sorted(users):
        seen += users[count]
        for share in (1 / 3, 2 / 3):  # the tercile's last count: the next starts above
            if seen - users[count] < share * total <= seen and count < max(users):
                floors.append(count + 1)
    floors = sorted(set(floors))
    return tuple(
        f"{low}+" if at == len(floors) - 1 else
        str(low) if floors[at + 1] - 1 == low else f"{low}-{floors[at + 1] - 1}"
        for at, low in enumerate(floors))


def floor_of(level: str) -> int:
    """The lowest count of an :func:`activity_levels` name.

    >>> floor_of("1-3"), floor_of("4+"), floor_of("0")
    (1, 4, 0)
    """
    return int(level.split("-")[0].rstrip("+"))


def levels_of(counts: Iterable[tuple[str, str, int]], dimensions: list[Segment]) -> Levels:
    """The levels of ``dimensions`` from ``(segment, value, lists)`` counts.

    >>> levels_of([("surface", "home", 9), ("surface", "search", 9), ("surface", "pdp", 2),
    ...            ("surface", NONE, 50)], [Segment("surface", "list", 2)])
    {'surface': ('home', 'search')}
    """
    out: Levels = {}
    for dimension in dimensions:
        if _built_in(dimension, COHORT):
            out[dimension.name] = user_queries.COHORTS
            continue
        if _built_in(dimension, ACTIVITY):
            users: dict[int, int] = {}
            for segment, value, n in counts:
                if segment == dimension.name and value not in (NONE, OTHER):
                    users[int(value)] = users.get(int(value), 0) + n
            out[dimension.name] = activity_levels(users)
            continue
        found = sorted(((value, lists) for segment, value, lists in counts
                        if segment == dimension.name and value not in (NONE, OTHER)),
                       key=lambda pair: (-pair[1], pair[0]))
        # the most frequent, named in sorted order (as the cells number them): the order of
        # their counts moves from run to run, and levels that differ recompute every day
        out[dimension.name] = tuple(sorted(value for value, _ in found[:dimension.max_levels]))
    return out


def encode(levels: Levels) -> str | None:
    """``rollup_state.levels`` of ``levels`` (None: no dimension)."""
    return json.dumps({name: list(values) for name, values in sorted(levels.items())},
                      ensure_ascii=False) if levels else None


def decode(text: str | None) -> Levels:
    return {name: tuple(values) for name, values in json.loads(text).items()} if text else {}


def refresh(engine: sa.Engine, info: ExperimentInfo, days: Iterable[date],
            rebuild: bool) -> tuple[Levels, bool]:
    """Count the lists of ``days`` (the days the run reads whole) and find the levels;
    returns them and whether they differ from those of the stored results (never on a
    ``rebuild``, which computes every day with them). Once raw logs of a day the
    experiment has results of expired, other levels could only come with a rebuild that
    expiry refuses (:func:`~tracker.rollup.retention.recomputable`): the stored levels are
    kept, frozen, and new values beyond them fall in :data:`OTHER`."""
    dimensions = sliced(info)
    if not dimensions:
        return {}, False
    days = sorted(set(days))
    with transaction(engine, write=True) as conn:
        rows = [row for day in days for row in day_counts(conn, info, day)]
        results.replace_slice_counts(conn, info.id, days, rows)
        levels = levels_of(results.slice_counts(conn, info.id), dimensions)
        stored = decode(results.stored_levels(conn, info.id))
        if not rebuild and levels != stored and levels.keys() == stored.keys() \
                and not retention.rebuildable(conn, info):
            return stored, False  # frozen: the days before the horizon keep their slices
    return levels, not rebuild and levels != stored
