"""A day computed whole stores its own popularity pairs, gathered from the interactions it
read anyway; they must be exactly the pairs the raw logs give
(:func:`tracker.rollup.queries.day_interaction_pairs`): the interactions of the day (named
or not, any event) by the users the experiment served that day."""

from __future__ import annotations

from datetime import timedelta

from tests.rollup.scenario import create, make_logs
from tests.rollup.test_rollup import NOW
from tracker.rollup import queries
from tracker.rollup.days import day_bounds
from tracker.rollup.popularity import DayPairs
from tracker.store import results
from tracker.store.arrow import ArrowReader
from tracker.store.experiments import get_experiment


def _as_set(pairs: DayPairs) -> set[tuple[str, str]]:
    items, users = pairs.items.to_pylist(), pairs.users.to_pylist()
    return {(items[i], users[u]) for i, u in zip(pairs.item_index, pairs.user_index,
                                                 strict=True)}


def test_a_days_stored_pairs_are_those_of_its_raw_logs(tracker):
    create(tracker)
    imps, events = make_logs(seed=41, days=2, users=10, impressions=50)
    first = min(r["served_at"] for r in imps)
    served_early = next(r for r in imps if r["served_at"].date() == first.date())
    extra = [
        # a user the experiment never served: not in the pairs
        {"event_id": "stranger", "user_id": "nobody", "item_id": "i1", "event": "click",
         "occurred_at": served_early["served_at"] + timedelta(minutes=5)},
        # a grade-0 event naming an impression: in the pairs (any event, named or not)
        {"event_id": "named", "user_id": served_early["user_id"], "item_id": "i24",
         "event": "view", "impression_id": served_early["impression_id"],
         "occurred_at": served_early["served_at"] + timedelta(minutes=6)},
    ]
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events + extra, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    with tracker.engine.connect() as conn:
        info = get_experiment(conn, "home")
        days = sorted(known[0] for known in results.known_days(conn, info.id))
        stored = results.pairs(conn, info.id, days[0], days[-1])
    assert set(stored) == set(days)  # every day computed whole stored its own
    with ArrowReader(tracker.engine) as reader:
        for day in days:
            table = queries.day_interaction_pairs(reader, info.id,
                                                  *day_bounds(day, info.timezone))
            expected = set(zip(table["item"].to_pylist(), table["user"].to_pylist(),
                               strict=True))
            assert _as_set(DayPairs.decode(stored[day])) == expected
    first_day = _as_set(DayPairs.decode(stored[days[0]]))
    assert ("i24", served_early["user_id"]) in first_day
    assert not any(user == "nobody" for _, user in first_day)
