"""The demo simulation: deterministic, realistic in the ways it claims, accepted by ingest."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime

from click.testing import CliRunner

from tracker.cli import main
from tracker.demo import DemoConfig, load, simulate

SMALL = DemoConfig(days=3, users=400, items=400, start=datetime(2026, 11, 1, tzinfo=UTC))


def _all(config):
    imps, events = [], []
    for batch in simulate(config):
        imps += batch.impressions
        events += batch.interactions
    return imps, events


def test_the_same_seed_gives_the_same_records():
    assert _all(SMALL) == _all(SMALL)
    other = DemoConfig(days=3, users=400, items=400, seed=8, start=SMALL.start)
    assert _all(other) != _all(SMALL)


def test_the_simulation_has_the_effects_it_claims():
    config = DemoConfig(days=4, users=1500, items=800, start=SMALL.start)
    imps, events = _all(config)
    clicked = {(e["user_id"], e["item_id"]) for e in events if e["event"] == "click"}
    shown, hit, distinct = Counter(), Counter(), defaultdict(set)
    by_rank = Counter()
    for imp in imps:
        shown[imp["arm"]] += 1
        distinct[imp["arm"]].update(imp["items"])
        hits = [(imp["user_id"], item) in clicked for item in imp["items"]]
        hit[imp["arm"]] += any(hits)
        for rank, h in enumerate(hits):
            by_rank[rank] += h
    rate = {arm: hit[arm] / shown[arm] for arm in shown}
    assert rate["personalised"] > rate["control"]  # the truly better model
    assert len(distinct["diverse"]) > len(distinct["personalised"]) > len(distinct["control"])
    assert by_rank[0] > by_rank[9]  # position bias
    users = Counter(imp["arm"] for imp in {i["user_id"]: i for i in imps}.values())
    assert min(users.values()) > 0.25 * sum(users.values())  # about a third each
    arms_of = defaultdict(set)
    for imp in imps:
        arms_of[imp["user_id"]].add(imp["arm"])
    assert any(len(a) > 1 for a in arms_of.values())  # some crossover
    ids = Counter(e["event_id"] for e in events)
    assert any(n > 1 for n in ids.values())  # retried sends
    assert {e["event"] for e in events} == {"click", "play", "save", "purchase"}
    assert all(imp["baseline_items"] and len(set(imp["items"])) == 10 for imp in imps)


def test_late_events_arrive_in_a_later_days_batch():
    late = 0
    for batch in simulate(SMALL):
        late += sum(e["occurred_at"].date() < batch.day for e in batch.interactions)
    assert late > 0


def test_every_record_is_accepted_and_loading_twice_stores_nothing_new(tracker):
    imps, events = _all(SMALL)
    first = load(tracker, SMALL)
    assert first.rejected == 0 and first.conflicts == 0
    retried = sum(n - 1 for n in Counter(e["event_id"] for e in events).values())
    assert first.duplicates == retried
    assert first.stored == len(imps) + len(events) - retried
    again = load(tracker, SMALL)
    assert again.stored == 0 and again.duplicates == len(imps) + len(events)


def test_demo_command_simulates_rolls_up_and_prints_the_main_metrics(empty_url):
    result = CliRunner().invoke(main, ["demo", "--days", "2", "--users", "300"],
                                env={"TRACKER_DATABASE_URL": empty_url})
    assert result.exit_code == 0, result.output
    assert "ndcg@10" in result.stdout and "personalised" in result.stdout
    assert "0 rejected" in result.stdout and "tracker report demo-home-recs" in result.stdout
    again = CliRunner().invoke(main, ["demo", "--days", "2", "--users", "300"],
                               env={"TRACKER_DATABASE_URL": empty_url})
    assert again.exit_code == 0 and ": 0 stored" in again.stdout
