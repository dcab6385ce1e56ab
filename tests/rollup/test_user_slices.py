"""Slices of user dimensions (issue 33): a user's slice is their value at their first
exposure (a context key of the first list served to them, or the built-in ``cohort``: new
without an interaction in the ``cuped_days`` before it, else returning), the same for
every list of theirs, so that the slices of an arm partition its users. Late rows that move
a user's first exposure, or add to the window before it, move the user's every day to their
new slice. Both databases."""

from __future__ import annotations

import math
from datetime import timedelta

import pandas as pd
import pytest

from tests.rollup import reference
from tests.rollup.scenario import CUTOFFS, RELEVANCE, WINDOW, create, dump
from tests.rollup.test_rollup import NOW, _close
from tests.rollup.test_slices import _run_in_batches, _sliced_logs
from tracker.rollup.levels import NONE, OTHER
from tracker.store import computed

DEVICES = {"ios": 0.5, "android": 0.3, "web": 0.12, None: 0.08}


def _logs(seed: int, *, history: int = 0, users: int = 16,
          impressions: int = 160) -> tuple[list[dict], list[dict]]:
    """Lists of users in one arm each, each list with a ``device`` drawn anew (None: no
    such key), so that a user's lists carry several devices."""
    return _sliced_logs(seed, users=users, impressions=impressions, weights=DEVICES,
                        key="device", history=history)


def _first_lists(imps: list[dict]) -> dict[str, dict]:
    """Each user's first exposure: the earliest served, the smaller impression id (in byte
    order) in a tie."""
    first: dict[str, dict] = {}
    for imp in imps:
        mine = first.get(imp["user_id"])
        if mine is None or (imp["served_at"], imp["impression_id"].encode()) < \
                (mine["served_at"], mine["impression_id"].encode()):
            first[imp["user_id"]] = imp
    return first


def _device_slices(imps: list[dict], max_levels: int) -> dict[str, str]:
    """Each user's slice of ``device``: their first list's value, folded as the rollup
    folds it (the values first exposed to the most users keep a slice)."""
    value = {u: imp["context"].get("device") for u, imp in _first_lists(imps).items()}
    counts: dict[str, int] = {}
    for v in value.values():
        if v is not None:
            counts[v] = counts.get(v, 0) + 1
    kept = {v for v, _ in sorted(counts.items(), key=lambda p: (-p[1], p[0]))[:max_levels]}
    return {u: NONE if v is None else v if v in kept else OTHER for u, v in value.items()}


def _cohorts(imps: list[dict], events: list[dict], days: int) -> dict[str, str]:
    first = _first_lists(imps)
    returning = {e["user_id"] for e in events if e["user_id"] in first
                 and first[e["user_id"]]["served_at"] - timedelta(days=days)
                 <= e["occurred_at"] < first[e["user_id"]]["served_at"]}
    return {u: "returning" if u in returning else "new" for u in first}


def _check(engine, imps: list[dict], events: list[dict], segment: str,
           slices: dict[str, str]) -> set[str]:
    """Every slice's rows against the reference over its users' lists (all of them, on
    every surface and device); the slices with users."""
    seen = set()
    first = min(imp["served_at"] for imp in imps).date()  # surprisal's reference: before it
    for value in set(slices.values()):
        mine = [imp for imp in imps if slices[imp["user_id"]] == value]
        users, sets, health = reference.rollup(mine, events, window=WINDOW,
                                               relevance=RELEVANCE, cutoffs=CUTOFFS,
                                               first_day=first)
        for cumulative in (False, True):
            table = computed.metric_table(engine, "home", cumulative, segment=segment)
            table = table[(table["slice"] == value) & (table["kind"] == "user")]
            assert not table.empty, value
            for row in table.itertuples():
                key = (cumulative, row.day, row.arm, row.metric,
                       0 if pd.isna(row.k) else int(row.k))
                if cumulative:  # a day without lists of the slice: the day before's
                    key = _latest(users, key)
                if row.users == 0:
                    assert key not in users, (value, key)
                    continue
                n, total, total_sq = users[key]
                assert (row.users, _close(row.sum, total), _close(row.sum_sq, total_sq)) \
                    == (n, True, True), (value, key)
            frame = computed.health_table(engine, "home", cumulative, segment=segment)
            for row in frame[frame["slice"] == value].itertuples():
                key = (cumulative, row.day, row.arm)
                key = _latest(health, key) if cumulative else key
                assert (row.users, row.impressions, row.crossover_users) == \
                    health.get(key, (0, 0, 0)), (value, row)
        seen.add(value)
    return seen


def _latest(found: dict, key: tuple) -> tuple:
    """The cumulative ``key`` of the reference, or that of the latest day before it the
    reference has (it has none for a day without lists of the slice)."""
    days = [k[1] for k in found if k[0] and k[2:] == key[2:] and k[1] <= key[1]]
    return (*key[:1], max(days), *key[2:]) if days else key


def test_a_users_slice_is_the_device_of_their_first_list_and_slices_partition_users(tracker):
    imps, events = _logs(3, users=40, impressions=200)
    create(tracker, segments=["device"], max_levels=1)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    slices = _device_slices(imps, 1)
    assert set(slices.values()) == {"ios", OTHER, NONE}
    assert _check(tracker.engine, imps, events, "device", slices) == set(slices.values())
    # the slices of an arm partition its users and its lists
    health = computed.health_table(tracker.engine, "home", True, segment="device")
    whole = computed.health_table(tracker.engine, "home", True)
    last = health["day"].max()
    for arm in ("control", "treatment"):
        sliced = health[(health["day"] == last) & (health["arm"] == arm)]
        total = whole[(whole["day"] == last) & (whole["arm"] == arm)].iloc[0]
        assert (sliced["users"].sum(), sliced["impressions"].sum()) == \
            (total["users"], total["impressions"])
    # and so do they by days since exposure: each slice's users add up to the arm's
    keys = ["exposure_day", "arm", "metric", "k"]
    by_slice = tracker.metric_table("home", view="exposure_day", segment="device")
    assert set(by_slice["slice"]) == {"ios", OTHER, NONE}
    added = by_slice.groupby(keys, dropna=False)[["users", "sum"]].sum().reset_index()
    whole = computed.exposure_day_table(tracker.engine, "home").merge(
        added, on=keys, suffixes=("", "_sliced"))
    assert len(whole) and (whole["users"] == whole["users_sliced"]).all()
    assert ((whole["sum"] - whole["sum_sliced"]).abs() <= 1e-9 * whole["sum"].abs() + 1e-9).all()


def test_the_cohort_is_new_without_an_interaction_in_the_window_before_the_first_list(
        tracker):
    imps, events = _logs(4, history=40)
    create(tracker, segments=["cohort"], cuped_days=7)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    cohorts = _cohorts(imps, events, 7)
    assert set(cohorts.values()) == {"new", "returning"}
    assert _check(tracker.engine, imps, events, "cohort", cohorts) == {"new", "returning"}
    # every user has a cohort: no (none) or (other) slice
    assert set(computed.metric_table(tracker.engine, "home", segment="cohort")["slice"]) == \
        {"new", "returning"}


def _activity(imps: list[dict], events: list[dict], days: int) -> dict[str, str]:
    """Each user's activity slice: the terciles of their interactions in the ``days``
    before their first list (the count at a third and two thirds of the sorted users end
    a slice), each named by its counts."""
    first = _first_lists(imps)
    counts = {u: sum(1 for e in events if e["user_id"] == u
                     and imp["served_at"] - timedelta(days=days) <= e["occurred_at"]
                     < imp["served_at"]) for u, imp in first.items()}
    ranked = sorted(counts.values())
    ends = {ranked[math.ceil(share * len(ranked)) - 1] for share in (1 / 3, 2 / 3)}
    floors = sorted({0} | {end + 1 for end in ends if end < ranked[-1]})
    names = [f"{low}+" if at == len(floors) - 1 else
             (str(low) if floors[at + 1] == low + 1 else f"{low}-{floors[at + 1] - 1}")
             for at, low in enumerate(floors)]
    return {u: next(name for low, name in zip(reversed(floors), reversed(names),
                                              strict=True) if n >= low)
            for u, n in counts.items()}


def test_activity_slices_are_the_terciles_of_the_pre_period_interactions(tracker):
    imps, events = _logs(5, history=120, users=30, impressions=200)
    create(tracker, segments=["activity"], cuped_days=7)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    slices = _activity(imps, events, 7)
    assert len(set(slices.values())) == 3, slices  # three terciles apart
    assert _check(tracker.engine, imps, events, "activity", slices) == set(slices.values())
    assert set(computed.metric_table(tracker.engine, "home", segment="activity")["slice"]) \
        == set(slices.values())  # no (none) or (other)


def _earliest_last(imps: list[dict]) -> list[dict]:
    """The lists in an order where each user's first list comes last: every user's first
    exposure moves to an earlier list on the way (and their slice with it)."""
    first = {id(imp) for imp in _first_lists(imps).values()}
    return sorted(imps, key=lambda imp: (id(imp) in first, imp["served_at"]))


@pytest.mark.parametrize(("seed", "imp_cuts", "evt_cuts"), [
    (1, [60, 120], [30]), (2, [10, 150], [5, 100, 160])])
def test_late_rows_that_move_a_first_exposure_end_in_one_full_rollups_tables(
        tracker, seed, imp_cuts, evt_cuts):
    """Late first lists move their users to another device slice, late pre-period
    interactions move new users to returning: each run recomputes those users' days, and
    the tables end as one full rollup's."""
    imps, events = _logs(seed, history=30)
    imps = _earliest_last(imps)
    events = sorted(events, key=lambda e: e["occurred_at"], reverse=True)  # history last
    create(tracker, segments=["device", "cohort", "activity"], max_levels=2, cuped_days=7)
    _run_in_batches(tracker, imps, events, imp_cuts, evt_cuts)
    incremental = dump(tracker.engine)
    assert any(("segment", "cohort") in row for row in incremental["rollup_metric"])
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental
    assert _check(tracker.engine, imps, events, "device", _device_slices(imps, 2))
    assert _check(tracker.engine, imps, events, "cohort", _cohorts(imps, events, 7))
    assert _check(tracker.engine, imps, events, "activity", _activity(imps, events, 7))


def test_first_lists_logged_last_move_their_users_every_day_to_their_slice(tracker):
    """Every user's first list arrives after the rest of theirs: each moves the user's
    device slice on every day already rolled up."""
    imps, events = _logs(7)
    first = {id(imp) for imp in _first_lists(imps).values()}
    create(tracker, segments=["device"], max_levels=2)
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.log_impressions([i for i in imps if id(i) not in first],
                            on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    tracker.log_impressions([i for i in imps if id(i) in first], on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental


def test_a_history_logged_last_moves_new_users_to_returning_on_every_day(tracker):
    """The interactions before the experiment arrive after it was rolled up: the users
    they make returning move to that slice on every day."""
    imps, events = _logs(8, history=40)
    before = min(imp["served_at"] for imp in imps)
    # surprisal's reference period (the day before the first) then holds no history: the
    # history changes no popularity, which would recompute every day whole anyway
    tracker.settings = tracker.settings.replace(rollup_popularity_days=1)
    create(tracker, segments=["cohort"], cuped_days=7)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions([e for e in events if e["occurred_at"] >= before],
                             on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    assert set(computed.metric_table(tracker.engine, "home", segment="cohort").query(
        "users > 0")["slice"]) == {"new"}
    tracker.log_interactions([e for e in events if e["occurred_at"] < before],
                             on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    incremental = dump(tracker.engine)
    assert "returning" in set(computed.metric_table(tracker.engine, "home",
                                                    segment="cohort").query("users > 0")["slice"])
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental


def test_a_tie_at_first_exposure_goes_to_the_smaller_impression_id_whatever_the_order(tracker):
    """Two first lists served at the same instant: the smaller impression id (byte order:
    "imp-10" before "imp-9") decides the user's slice, whichever was logged first, and a
    tie logged after a rollup moves the user as a full rollup would."""
    imps, events = _logs(4)
    user = imps[0]["user_id"]
    first = _first_lists(imps)[user]
    tied = [dict(first, impression_id=f"tie-{n}", context={"device": device})
            for n, device in ((9, "ios"), (10, "android"))]
    mine = [imp for imp in imps if imp is not first]
    create(tracker, segments=["device"], max_levels=4)
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.log_impressions(mine + [tied[0]], on_invalid="all_or_nothing")  # "tie-9" first
    tracker.rollup("home", now=NOW)
    tracker.log_impressions([tied[1]], on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental
    everything = mine + tied
    assert _first_lists(everything)[user]["impression_id"] == "tie-10"
    assert _check(tracker.engine, everything, events, "device", _device_slices(everything, 4))
