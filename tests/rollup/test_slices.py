"""Slices of list dimensions (issue 33): every per-arm result of the rollup also per (arm,
slice) of each declared list dimension, each list in the slice of its own ``context``
value; the most frequent values keep a slice, the others fold into ``(other)``, lists
without the key are ``(none)``. Both databases."""

from __future__ import annotations

import random
from collections import Counter
from itertools import zip_longest

import pandas as pd
import pytest
import sqlalchemy as sa

from tests.rollup import reference
from tests.rollup.scenario import CUTOFFS, RELEVANCE, WINDOW, create, dump, make_logs
from tests.rollup.test_rollup import NOW, _batches, _close
from tracker.rollup.levels import NONE, OTHER, levels_of
from tracker.store import computed
from tracker.store.experiments import Segment

CATALOG = frozenset(f"i{n}" for n in range(25))  # make_logs' items: one catalog for all
SURFACES = {"home": 0.45, "search": 0.25, "pdp": 0.15, None: 0.10, 7: 0.05}


def _sliced_logs(seed: int, *, days: int = 3, users: int = 16, impressions: int = 160,
                 weights: dict = SURFACES, key: str = "surface", history: int = 0
                 ) -> tuple[list[dict], list[dict]]:
    """make_logs' lists, each user in one arm (no crossover: the reference of a slice then
    counts the users the rollup counts), with a ``key`` (``surface``) drawn from
    ``weights`` (None: no such key, the other of surface and device instead; 7: a number,
    which names its slice "7")."""
    imps, events = make_logs(seed, days=days, users=users, impressions=impressions,
                             history=history)
    rng = random.Random(seed)
    values, chances = list(weights), list(weights.values())
    other = {"device": "ios"} if key == "surface" else {"surface": "home"}
    for imp in imps:
        imp["arm"] = "control" if int(imp["user_id"][1:]) % 2 == 0 else "treatment"
        value = rng.choices(values, chances)[0]
        imp["context"] = dict(other) if value is None else {key: value}
    return imps, events


def _slice_of(imp: dict, levels: tuple[str, ...]) -> str:
    value = imp.get("context", {}).get("surface")
    if value is None:
        return NONE
    return str(value) if str(value) in levels else OTHER


def _expected_levels(imps: list[dict], max_levels: int) -> tuple[str, ...]:
    counts = Counter(str(imp["context"]["surface"]) for imp in imps
                     if "surface" in imp["context"])
    ranked = sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))
    return tuple(sorted(value for value, _ in ranked[:max_levels]))


def _check_slice(engine: sa.Engine, imps: list[dict], events: list[dict], value: str) -> int:
    """The rollup's rows of one slice against the reference over that slice's lists; the
    rows checked."""
    mine = [imp for imp in imps if imp["slice"] == value]
    users, sets, health = reference.rollup(mine, events, window=WINDOW, relevance=RELEVANCE,
                                           cutoffs=CUTOFFS, declared=CATALOG)
    checked = 0
    for cumulative in (False, True):
        table = computed.metric_table(engine, "home", cumulative, segment="surface")
        table = table[table["slice"] == value]
        assert not table.empty, value
        for row in table.itertuples():
            k = 0 if pd.isna(row.k) else int(row.k)
            key = (cumulative, row.day, row.arm, row.metric, k)
            if row.kind == "set":
                assert _close(row.sum, sets[key]), (value, key, row.sum, sets[key])
            elif row.users == 0:
                assert key not in users, (value, key)
            else:
                n, total, total_sq = users[key]
                assert (row.users, _close(row.sum, total), _close(row.sum_sq, total_sq)) == \
                    (n, True, True), (value, key)
            checked += 1
        frame = computed.health_table(engine, "home", cumulative, segment="surface")
        for row in frame[frame["slice"] == value].itertuples():
            expected = health.get((cumulative, row.day, row.arm), (0, 0, 0))
            assert (row.users, row.impressions, row.crossover_users) == expected, (value, row)
    return checked


def test_each_slice_equals_the_reference_over_the_lists_of_that_slice(tracker):
    imps, events = _sliced_logs(3)
    create(tracker, segments=["surface:list"], max_levels=2)
    tracker.declare_catalog("home", sorted(CATALOG))
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    levels = _expected_levels(imps, 2)
    assert levels == ("home", "search")
    for imp in imps:
        imp["slice"] = _slice_of(imp, levels)
    found = set(computed.metric_table(tracker.engine, "home", segment="surface")["slice"])
    assert found == {"home", "search", OTHER, NONE}  # pdp and 7 fold into (other)
    assert all(_check_slice(tracker.engine, imps, events, value) for value in found)
    # the whole arms are unchanged by the slices beside them
    whole = computed.metric_table(tracker.engine, "home", True)
    users, _, _ = reference.rollup(imps, events, window=WINDOW, relevance=RELEVANCE,
                                   cutoffs=CUTOFFS, declared=CATALOG)
    row = whole[(whole["metric"] == "ndcg") & (whole["k"] == 5)].iloc[-1]
    n, total, _ = users[(True, row["day"], row["arm"], "ndcg", 5)]
    assert row["users"] == n and _close(row["sum"], total)


def test_a_users_lists_count_in_each_slice_they_were_served_in_and_only_there(tracker):
    """A user served on two surfaces is a user of each slice, with their mean over that
    slice's lists; slices do not partition the users (list dimension)."""
    imps, events = _sliced_logs(5)
    create(tracker, segments=["surface:list"], max_levels=3)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    health = computed.health_table(tracker.engine, "home", True, segment="surface")
    last = health[health["day"] == health["day"].max()]
    whole = computed.health_table(tracker.engine, "home", True)
    arms = whole[(whole["day"] == whole["day"].max()) & whole["arm"].notna()]
    for arm in ("control", "treatment"):
        sliced = last[last["arm"] == arm]
        total = arms[arms["arm"] == arm].iloc[0]
        assert sliced["impressions"].sum() == total["impressions"]  # each list once
        assert sliced["users"].sum() > total["users"]  # users on several surfaces
        served = {(imp["user_id"], _slice_of(imp, _expected_levels(imps, 3)))
                  for imp in imps if imp["arm"] == arm}
        for row in sliced.itertuples():
            assert row.users == sum(1 for _, s in served if s == row.slice), row


def test_a_crossover_user_counts_in_no_slice_and_slices_are_no_crossover(tracker):
    imps, events = _sliced_logs(8)
    switched = dict(imps[0], impression_id="switched", context={"surface": "home"},
                    arm="treatment" if imps[0]["arm"] == "control" else "control")
    create(tracker, segments=["surface:list"])
    tracker.log_impressions(imps + [switched], on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    health = computed.health_table(tracker.engine, "home", True, segment="surface")
    last = health[health["day"] == health["day"].max()]
    assert last["crossover_users"].max() == 1  # the switched user, in their slices only
    whole = computed.health_table(tracker.engine, "home", True)
    assert whole[whole["day"] == whole["day"].max()]["crossover_users"].max() == 1


def _run_in_batches(tracker, imps, events, imp_cuts, evt_cuts) -> None:
    for imp_batch, evt_batch in zip_longest(_batches(imps, imp_cuts),
                                            _batches(events, evt_cuts), fillvalue=[]):
        tracker.log_impressions(imp_batch, on_invalid="all_or_nothing")
        tracker.log_interactions(evt_batch, on_invalid="all_or_nothing")
        tracker.rollup("home", now=NOW)


@pytest.mark.parametrize(("seed", "imp_cuts", "evt_cuts"), [
    (1, [40, 90], [30]), (2, [10, 20, 150], [5, 100]), (4, [80], [])])
def test_any_split_and_order_of_the_logs_ends_in_the_tables_of_one_full_rollup(
        tracker, seed, imp_cuts, evt_cuts):
    """Late lists change the levels on the way (the first batches have other most frequent
    values): the run that finds other levels recomputes every day with them, so the
    tables end as one full rollup's, slices and counts included."""
    imps, events = _sliced_logs(seed)
    # the first lists' surfaces are the rare ones: the levels move as the others come
    imps.sort(key=lambda r: (str(r["context"].get("surface")) != "pdp", r["served_at"]))
    create(tracker, segments=["surface:list"], max_levels=2)
    _run_in_batches(tracker, imps, events, imp_cuts, evt_cuts)
    incremental = dump(tracker.engine)
    assert any(row for row in incremental["rollup_metric"] if ("segment", "surface") in row)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental


def _served(tracker) -> set[str]:
    """The slices with users (every level has rows, with 0 users where none)."""
    table = computed.metric_table(tracker.engine, "home", segment="surface")
    return set(table[table["users"] > 0]["slice"])


def test_levels_that_change_recompute_every_day_and_levels_that_stay_recompute_none(tracker):
    imps, events = _sliced_logs(6, weights={"pdp": 0.6, "home": 0.4})
    create(tracker, segments=["surface:list"], max_levels=1)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    first = tracker.rollup("home", now=NOW)[0]
    assert _served(tracker) == {"pdp", OTHER}
    late, _ = _sliced_logs(60, weights={"home": 1.0}, impressions=250)
    for imp in late:
        imp["impression_id"] = "late-" + imp["impression_id"]
    tracker.log_impressions(late[:1], on_invalid="all_or_nothing")  # one list: same levels
    assert tracker.rollup("home", now=NOW)[0].days_recomputed != first.days_recomputed
    tracker.log_impressions(late[1:], on_invalid="all_or_nothing")  # home now leads
    assert tracker.rollup("home", now=NOW)[0].days_recomputed == first.days_recomputed
    assert _served(tracker) == {"home", OTHER}


def test_a_dimension_not_declared_is_refused_naming_those_declared(tracker):
    from tracker.errors import ValidationError

    create(tracker, segments=["surface:list", "device"])
    with pytest.raises(ValidationError, match="no dimension 'country' .*surface, device"):
        computed.metric_table(tracker.engine, "home", segment="country")


def test_levels_do_not_change_when_only_the_order_of_their_counts_does():
    """Levels that differ recompute every day: the same values kept must compare equal
    whichever is more frequent this run (a user dimension's values at first exposure
    reorder every night as users arrive), and the most frequent are still the ones kept."""
    dims = [Segment("device", "user", 20)]
    before = levels_of([("device", "web", 9), ("device", "ios", 5)], dims)
    after = levels_of([("device", "web", 5), ("device", "ios", 9)], dims)
    assert before == after == {"device": ("ios", "web")}
    one = [Segment("device", "user", 1)]
    assert levels_of([("device", "web", 9), ("device", "ios", 5)], one) == {"device": ("web",)}
