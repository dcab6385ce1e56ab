"""The demo simulation: deterministic, and realistic in the ways it claims, measured on its
output (the default configuration, the one `tracker demo` loads)."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from tracker.demo import (
    ARMS,
    RELEVANCE,
    SURFACES,
    DemoConfig,
    assign_arm,
    experiment_spec,
    history,
    new_users,
    simulate,
)

START = datetime(2026, 10, 1, tzinfo=UTC)
SMALL = DemoConfig(days=3, users=300, items=400, start=START)
WINDOW = timedelta(hours=24)


def _all(config):
    imps, events = [], []
    for batch in simulate(config):
        imps += batch.impressions
        events += batch.interactions
    return imps, events


@pytest.fixture(scope="module")
def demo():
    """The default demo (14 days, 3,000 users, 2,000 items), with its batches."""
    batches = list(simulate(DemoConfig(start=START)))
    imps = [i for b in batches for i in b.impressions]
    events = [e for b in batches for e in b.interactions]
    return batches, imps, events


@pytest.fixture(scope="module")
def attributed(demo):
    """Per impression, which ranks got a click from that user within the 24-hour window."""
    _, imps, events = demo
    clicks = defaultdict(list)
    for e in events:
        if e["event"] == "click":
            clicks[e["user_id"], e["item_id"]].append(e["occurred_at"])
    for times in clicks.values():
        times.sort()

    def clicked(user, item, served):
        times = clicks.get((user, item), ())
        i = bisect_left(times, served)
        return i < len(times) and times[i] <= served + WINDOW

    return [[clicked(imp["user_id"], item, imp["served_at"]) for item in imp["items"]]
            for imp in imps]


def test_the_same_seed_gives_the_same_records():
    assert _all(SMALL) == _all(SMALL)
    assert _all(DemoConfig(days=3, users=300, items=400, seed=8, start=START)) != _all(SMALL)


def test_the_default_demo_is_of_the_promised_size(demo):
    batches, imps, events = demo
    assert len(batches) == 14
    assert 40_000 <= len(imps) <= 80_000
    assert len(events) > 10_000
    assert len({i["impression_id"] for i in imps}) == len(imps)


def test_the_default_start_is_midnight_utc_days_before_today_and_all_is_in_the_past():
    now = datetime.now(UTC)
    config = DemoConfig(days=2, users=100, items=200)
    batches = list(simulate(config))
    assert batches[0].day == (now - timedelta(days=2)).date()
    assert experiment_spec(config)["starts_at"] == datetime.combine(
        batches[0].day, datetime.min.time(), UTC)
    stamps = ([i["served_at"] for b in batches for i in b.impressions]
              + [e["occurred_at"] for b in batches for e in b.interactions])
    assert all(t.tzinfo is not None and t.utcoffset() == timedelta(0) for t in stamps)
    assert max(stamps) < now


def test_records_have_the_logging_api_fields_and_a_valid_shape(demo):
    _, imps, events = demo
    assert {frozenset(i) for i in imps} == {frozenset(
        {"impression_id", "experiment", "arm", "user_id", "items", "scores", "baseline_items",
         "served_at", "context"})}
    assert {frozenset(e) - {"impression_id"} for e in events} == {frozenset(
        {"event_id", "user_id", "item_id", "event", "occurred_at"})}
    for imp in imps:
        assert len(set(imp["items"])) == len(imp["scores"]) == 10
        assert len(set(imp["baseline_items"])) == 10
        assert imp["scores"] == sorted(imp["scores"], reverse=True)
    assert {e["event"] for e in events} == set(RELEVANCE)


def _days_since_exposure(imps: list[dict]) -> list[int]:
    first: dict[str, object] = {}
    for imp in imps:
        day = imp["served_at"].date()
        first[imp["user_id"]] = min(first.get(imp["user_id"], day), day)
    return [(imp["served_at"].date() - first[imp["user_id"]]).days for imp in imps]


def _ctr(imps, attributed, keep, home: bool = False) -> dict[str, float]:
    """Per arm, clicks per list of the lists ``keep`` (days since exposure) takes (``home``:
    of the home feed only, where every arm's list is its model's alone)."""
    shown, clicks = Counter(), Counter()
    for imp, ranks, days in zip(imps, attributed, _days_since_exposure(imps), strict=True):
        if keep(days) and (not home or imp["context"]["surface"] == "home"):
            shown[imp["arm"]] += 1
            clicks[imp["arm"]] += sum(ranks)
    return {arm: clicks[arm] / shown[arm] for arm in ARMS}


def test_the_personalised_arm_is_truly_better_and_the_diverse_arm_covers_more(demo, attributed):
    _, imps, _ = demo
    shown, clicks, hits, distinct = Counter(), Counter(), Counter(), defaultdict(set)
    for imp, ranks in zip(imps, attributed, strict=True):
        arm = imp["arm"]
        shown[arm] += 1
        clicks[arm] += sum(ranks)
        hits[arm] += any(ranks)
        if imp["context"]["surface"] == "home":  # elsewhere every arm serves the same
            distinct[arm].update(imp["items"])
    ctr = {arm: clicks[arm] / shown[arm] for arm in ARMS}
    hit_rate = {arm: hits[arm] / shown[arm] for arm in ARMS}
    assert ctr["personalised"] > 1.05 * ctr["control"]  # diluted: see the next test
    assert hit_rate["personalised"] > hit_rate["control"]
    settled = _ctr(imps, attributed, lambda days: days >= 10, home=True)  # novelty gone
    assert settled["diverse"] < settled["personalised"]  # precision
    assert len(distinct["diverse"]) > len(distinct["personalised"]) > len(distinct["control"])
    assert len(distinct["diverse"]) > 0.9 * 2000  # ... for a catalog coverage near 100%


def _where(imp: dict, cold: set[str]) -> str:
    """Who the list was served to and where: ``cold`` (a user without a click before the
    experiment), else ``home`` or ``away`` (search, item pages) of a known user."""
    if imp["user_id"] in cold:
        return "cold"
    return "home" if imp["context"]["surface"] == "home" else "away"


@pytest.fixture(scope="module")
def cold(demo):
    """The demo's users without a click in the 14 days before their first list (what its
    cohort calls new): the personalised model does not know them."""
    _, imps, _ = demo
    first: dict[str, datetime] = {}
    for imp in imps:
        first[imp["user_id"]] = min(first.get(imp["user_id"], imp["served_at"]),
                                    imp["served_at"])
    known = {e["user_id"] for e in history(DemoConfig(start=START)) if e["event"] == "click"
             and e["user_id"] in first
             and first[e["user_id"]] - timedelta(days=14) <= e["occurred_at"]
             < first[e["user_id"]]}
    return set(first) - known


def test_the_personalised_arms_win_is_on_known_users_home_feeds(demo, attributed, cold):
    """The model serves users it has no click of the popularity list (cold start), and off
    the home feed every arm serves the page's own list: the demo's segments show the win
    concentrated."""
    _, imps, _ = demo
    new = new_users(DemoConfig(start=START))
    assert 0.15 * 3000 < len(new) < 0.25 * 3000 and new <= cold | (new - {
        i["user_id"] for i in imps})  # new users have no history
    assert {i["context"]["surface"] for i in imps} == set(SURFACES)
    ratio = {}
    for where in ("home", "away"):
        shown, clicks = Counter(), Counter()
        for imp, ranks in zip(imps, attributed, strict=True):
            if _where(imp, cold) == where:
                shown[imp["arm"]] += 1
                clicks[imp["arm"]] += sum(ranks)
        ratio[where] = clicks["personalised"] / shown["personalised"] / (
            clicks["control"] / shown["control"])
    # cold users' lists are the control's (test_control_lists_are_the_shadow_baseline), and
    # off the home feed every arm serves the same lists: what is left away from the known
    # users' home lists is the arms' users differing (1,000 an arm; seeds 3-12 give 0.82-1.15,
    # against 1.45-2.06 on the home feeds), not the model
    assert ratio["home"] > 1.2 and 0.8 < ratio["away"] < 1.2, ratio
    assert abs(math.log(ratio["away"])) < abs(math.log(ratio["home"])) / 2, ratio
    # new users join on the experiment's days, some after its first
    first = min(i["served_at"] for i in imps).date()
    assert any(i["served_at"].date() > first for i in imps if i["user_id"] in new)


def test_the_diverse_arms_novelty_fades_with_the_days_since_exposure(demo, attributed, cold):
    """Among the users the personalised model knows (the share of the others, whom it serves
    the control's list, changes with the days since exposure: users new to the product
    join late)."""
    _, imps, _ = demo
    known = [(i, a) for i, a in zip(imps, attributed, strict=True) if i["user_id"] not in cold]
    imps, attributed = [i for i, _ in known], [a for _, a in known]
    early = _ctr(imps, attributed, lambda days: days == 0)
    late = _ctr(imps, attributed, lambda days: days >= 10)
    against = {arm: early[arm] / early["control"] / (late[arm] / late["control"])
               for arm in ("personalised", "diverse")}  # the change of the CTR ratio
    assert against["diverse"] > 1.3  # the clicks doubled on day 0, +20% from day 10 on
    # no novelty there: only the noise of day 0's few lists (the default seed 0.95, seeds 7,
    # 8 and 11 1.08-1.27), well apart from the diverse arm's 1.8 (seeds 7-11: 1.4-1.8)
    assert 0.8 < against["personalised"] < 1.25
    assert against["diverse"] > 1.35 * against["personalised"]


def test_clicks_show_position_bias(attributed):
    by_rank = [sum(ranks[r] for ranks in attributed) for r in range(10)]
    assert by_rank[0] > 3 * by_rank[9]
    assert by_rank[0] > by_rank[4] > by_rank[9]


def test_control_lists_are_the_shadow_baseline(demo, cold):
    _, imps, _ = demo
    control = [i for i in imps if i["arm"] == "control"]
    assert all(i["baseline_items"] == i["items"] for i in control)
    home = [i for i in imps if i["context"]["surface"] == "home"]
    others = [i for i in home if i["arm"] == "diverse" or
              i["arm"] == "personalised" and i["user_id"] not in cold]
    assert sum(i["baseline_items"] != i["items"] for i in others) == len(others)
    fallback = [i for i in home if i["arm"] == "personalised" and i["user_id"] in cold]
    assert fallback and all(i["baseline_items"] == i["items"] for i in fallback)
    # off the home feed every arm serves the page's own list
    away = [i for i in imps if i["context"]["surface"] != "home"]
    assert away and all(i["baseline_items"] == i["items"] for i in away)


def test_users_split_by_a_stable_hash_into_thirds_with_a_few_crossovers(demo):
    _, imps, _ = demo
    arms_of = defaultdict(set)
    for imp in imps:
        arms_of[imp["user_id"]].add(imp["arm"])
    crossover = {u for u, arms in arms_of.items() if len(arms) > 1}
    assert 5 <= len(crossover) <= 0.01 * len(arms_of)
    users = Counter(next(iter(arms)) for u, arms in arms_of.items() if u not in crossover)
    assert set(users) == set(ARMS)
    assert max(users.values()) < 1.15 * min(users.values())
    weights = DemoConfig().weights
    assert all(ARMS[assign_arm("demo-home-recs", u, weights)] in arms_of[u] for u in arms_of)
    single = [u for u in arms_of if u not in crossover]
    assert all({ARMS[assign_arm("demo-home-recs", u, weights)]} == arms_of[u] for u in single)


def test_assignment_follows_the_weights():
    users = [f"user-{u}" for u in range(6000)]
    split = Counter(assign_arm("k", u, (0.5, 0.25, 0.25)) for u in users)
    assert abs(split[0] / 6000 - 0.5) < 0.03 and abs(split[1] / 6000 - 0.25) < 0.03
    assert [assign_arm("k", u, (1, 1, 1)) for u in users[:50]] == \
        [assign_arm("k", u, (2, 2, 2)) for u in users[:50]]


def test_users_differ_in_activity(demo):
    _, imps, _ = demo
    visits = sorted(Counter(i["user_id"] for i in imps).values())
    assert visits[len(visits) // 4] <= 5  # many come rarely
    assert visits[-len(visits) // 20] >= 40  # a few come every day, several times


def test_events_follow_their_list_some_outside_the_window_some_outside_the_list(demo):
    _, imps, events = demo
    served = {i["impression_id"]: i for i in imps}
    user_lists = defaultdict(list)
    for imp in imps:
        user_lists[imp["user_id"]].append(imp)
    explicit = [e for e in events if "impression_id" in e]
    assert 0.02 * len(events) < len(explicit) < 0.1 * len(events)
    for e in explicit:
        imp = served[e["impression_id"]]
        assert imp["user_id"] == e["user_id"] and e["occurred_at"] > imp["served_at"]
    gaps = [e["occurred_at"] - served[e["impression_id"]]["served_at"] for e in explicit]
    assert min(gaps) < timedelta(minutes=5) and max(gaps) < timedelta(hours=31)
    # most purchases within hours of their click, a few after the 24-hour window
    clicks = defaultdict(list)
    for e in events:
        if e["event"] == "click":
            clicks[e["user_id"], e["item_id"]].append(e["occurred_at"])
    delays = [e["occurred_at"] - max(before)
              for e in events if e["event"] == "purchase"
              for before in [[t for t in clicks[e["user_id"], e["item_id"]]
                              if t <= e["occurred_at"]]]
              if before]  # (a click still on its way late at the end has no time yet)
    late_buys = sum(d > WINDOW for d in delays)
    assert 0.02 * len(delays) < late_buys < 0.2 * len(delays)
    # a click on none of the lists the user saw in the 24 hours before: found on their own
    def in_a_list(e):
        return any(e["item_id"] in imp["items"]
                   and imp["served_at"] <= e["occurred_at"] <= imp["served_at"] + WINDOW
                   for imp in user_lists[e["user_id"]])
    outside = [e for e in events[:5000] if e["event"] == "click" and not in_a_list(e)]
    assert len(outside) > 100


def test_late_and_retried_interactions(demo):
    batches, _, events = demo
    late = 0
    for batch in batches:
        end = datetime.combine(batch.day, datetime.min.time(), UTC) + timedelta(days=1)
        assert all(e["occurred_at"] < end for e in batch.interactions)  # never from the future
        late += sum(e["occurred_at"].date() < batch.day for e in batch.interactions)
    assert 0.01 * len(events) < late < 0.1 * len(events)
    copies = Counter(e["event_id"] for e in events)
    retried = [i for i, n in copies.items() if n > 1]
    assert 0.002 * len(copies) < len(retried) < 0.03 * len(copies)
    first = {}
    for e in events:
        assert first.setdefault(e["event_id"], e) == e  # a retry repeats the same payload


@pytest.mark.parametrize("bad", [
    pytest.param({"days": 0}, id="no-days"),
    pytest.param({"weights": (1, 1)}, id="weights-not-one-per-arm"),
    pytest.param({"start": datetime(2026, 1, 1)}, id="naive-start"),
    pytest.param({"items": 20}, id="catalog-too-small-for-the-lists"),
])
def test_config_rejects_what_it_cannot_simulate(bad):
    with pytest.raises(ValueError):
        DemoConfig(**bad)
