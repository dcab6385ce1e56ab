"""One heavy user's day (a bot, a shared anonymous id: many lists, each answered by many
clicks on distinct items) rolls up within the memory bound: attribution makes its pairs in
bounded blocks, the ground truth is compacted to what the metrics read, and the results are
those of the unbounded computation and of the naive reference, incremental or ``--full``."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest

from tests.helpers import T0
from tests.rollup.scenario import RELEVANCE, create, dump, make_logs
from tests.rollup.test_rollup import _check_against_reference
from tracker import Tracker
from tracker.rollup import columnar
from tracker.rollup.day import MIN_PAIR_LIMIT
from tracker.rollup.truth import Truth, compact_truth

EARLY = T0  # before every impression: every day stays provisional
LATER = T0 + timedelta(days=30)  # every window closed: every day final
SMALL = 1  # TRACKER_ROLLUP_CHUNK_CELLS: pairs made MIN_PAIR_LIMIT at a time
HUGE = 10**12  # no bound reached: the unblocked computation, nothing compacted


def heavy_logs(seed: int, lists: int = 300, clicks: int = 200):
    """Ordinary users' logs (one day) plus a bot served ``lists`` lists within three hours
    and clicking ``clicks`` distinct items (graded events) in the same hours: each list's
    window (6 h) holds ~half the clicks, ~30,000 pairs against the bound's 10,000."""
    imps, events = make_logs(seed, days=1, users=8, impressions=60)
    rng = random.Random(seed)
    catalog = [f"h{n}" for n in range(clicks)]
    for n in range(lists):
        imps.append({"impression_id": f"bot-imp-{n}", "experiment": "home", "arm": "control",
                     "user_id": "bot", "items": rng.sample(catalog, 6),
                     "served_at": T0 + timedelta(seconds=rng.randrange(3 * 3600))})
    for n, item in enumerate(rng.sample(catalog, clicks)):
        events.append({"event_id": f"bot-evt-{n}", "user_id": "bot", "item_id": item,
                       "event": rng.choice(["click", "save", "purchase", "view"]),
                       "occurred_at": T0 + timedelta(seconds=rng.randrange(3 * 3600))})
    assert sum(RELEVANCE[e["event"]] > 0 for e in events if e["user_id"] == "bot") > 100
    return imps, events


@pytest.fixture
def largest_made(monkeypatch):
    """The most (impression, interaction) pairs one call made or took: the expanded
    runs, and the pairs :meth:`Truth.highest` reduces (those of a block, or of a chunk)."""
    seen = {"pairs": 0}
    expand, highest = columnar.AnswerRuns.pairs, Truth.highest.__func__

    def pairs(self, first, last):
        made = expand(self, first, last)
        seen["pairs"] = max(seen["pairs"], made[0].size)
        return made

    def reduced(cls, rows, *args):
        seen["pairs"] = max(seen["pairs"], rows.size)
        return highest(cls, rows, *args)

    monkeypatch.setattr(columnar.AnswerRuns, "pairs", pairs)
    monkeypatch.setattr(Truth, "highest", classmethod(reduced))
    return seen


BOT_DAY = T0.date().isoformat()


def test_a_heavy_users_day_stays_within_the_bound_and_equals_the_reference(
        settings, largest_made):
    imps, events = heavy_logs(seed=3)
    with Tracker(settings=settings.replace(rollup_chunk_cells=SMALL)) as tracker:
        create(tracker)
        tracker.log_impressions(imps, on_invalid="all_or_nothing")
        tracker.log_interactions(events, on_invalid="all_or_nothing")
        (summary,) = tracker.rollup("home", now=EARLY)
        # the bot's pairs, ~30,000, never all at once (keyed events: a few more, and an
        # impression answered by more than the bound would come alone)
        assert summary.truth_pairs_read > 2 * MIN_PAIR_LIMIT
        assert largest_made["pairs"] <= MIN_PAIR_LIMIT + len(events)
        _check_against_reference(tracker, imps, events)
        bounded = dump(tracker.engine)
    with Tracker(settings=settings.replace(rollup_chunk_cells=HUGE)) as tracker:
        tracker.rollup("home", full=True, now=EARLY)
        assert dump(tracker.engine) == bounded


@pytest.mark.parametrize("cuts", [
    pytest.param((0.3, 0.6), id="clicks-in-three-batches"),
    pytest.param((0.05, 0.95), id="a-few-clicks-then-most-then-the-last"),
])
def test_a_heavy_users_day_rolled_up_as_its_logs_arrive_equals_one_full_rollup(
        settings, largest_made, cuts):
    """The first batch is light (the day keeps its state); the next makes too many pairs
    for the state (the plan only counts them; the rescoring reads the day from the logs
    and drops the state); the last meets a day without state. Each run stays within the
    bound; the end equals one ``--full``, provisional and final."""
    imps, events = heavy_logs(seed=5)
    events.sort(key=lambda e: e["occurred_at"])
    bounds = [0] + [int(c * len(events)) for c in cuts] + [len(events)]
    with Tracker(settings=settings.replace(rollup_chunk_cells=SMALL)) as tracker:
        create(tracker)
        tracker.log_impressions(imps, on_invalid="all_or_nothing")
        for low, high in zip(bounds, bounds[1:], strict=False):
            tracker.log_interactions(events[low:high], on_invalid="all_or_nothing")
            tracker.rollup("home", now=EARLY)
            assert largest_made["pairs"] <= MIN_PAIR_LIMIT + len(events)
        incremental = dump(tracker.engine)
        tracker.rollup("home", full=True, now=EARLY)
        assert dump(tracker.engine) == incremental
        tracker.rollup("home", now=LATER)  # final
        final = dump(tracker.engine)
        tracker.rollup("home", full=True, now=LATER)
        assert dump(tracker.engine) == final
        _check_against_reference(tracker, imps, events)


def test_compaction_keeps_served_items_and_the_highest_unserved_ones():
    # list 0 serves items 1 and 2; relevant: 2 (served, grade 1) and unserved 3..7 graded
    # 2, 5, 5, 1, 3: with keep=2, items 4 and 5 (grade 5) stay, 3, 6, 7 are counted
    served = np.array([[1, 2, -1], [8, 9, 10]])
    truth = Truth(np.array([0, 0, 0, 0, 0, 0, 1]), np.array([2, 3, 4, 5, 6, 7, 9]),
                           np.array([1.0, 2.0, 5.0, 5.0, 1.0, 3.0, 1.0]))
    ground = compact_truth(truth, served, keep=2, n_items=11)
    assert list(zip(ground.truth.rows.tolist(), ground.truth.items.tolist(),
                    strict=True)) == [(0, 2), (0, 4), (0, 5), (1, 9)]
    assert ground.unlisted.tolist() == [3, 0]
    assert sorted(ground.dropped_items.tolist()) == [3, 6, 7]
    assert ground.pairs == 7
    # no list with more than ``keep`` relevant items: the truth as it was
    light = compact_truth(truth, served, keep=6, n_items=11)
    assert light.truth is truth and light.unlisted is None


def test_compaction_of_long_lists_that_served_every_relevant_item_cuts_nothing():
    """A list with more relevant items than ``keep``, all of them served, has nothing to
    cut (the review's case: it raised a ValueError reshaping the empty grade counts)."""
    served = np.array([[1, 2, 3], [4, 5, 6]])
    truth = Truth(np.array([0, 0, 0, 1]), np.array([1, 2, 3, 5]),
                           np.array([1.0, 2.0, 1.0, 1.0]))
    ground = compact_truth(truth, served, keep=2, n_items=7)
    assert ground.truth is truth and ground.unlisted is None
    assert ground.dropped_items.size == 0 and ground.pairs == 4


def test_answered_marks_what_attribution_pairs_without_making_the_pairs():
    rng = np.random.default_rng(7)
    imp_user, imp_at = rng.integers(0, 5, 200), rng.integers(0, 1_000, 200)
    it_user, it_at = rng.integers(0, 5, 80), rng.integers(0, 1_000, 80)
    rows, _ = columnar.attribute(imp_user, imp_at, it_user, it_at, window=50)
    want = np.zeros(200, dtype=bool)
    want[rows] = True
    np.testing.assert_array_equal(columnar.answered(imp_user, imp_at, it_user, it_at, 50),
                                  want)
    # user codes too large to pack with the times: the impressions sorted instead
    big = imp_user.astype(np.int64) + 2**61
    np.testing.assert_array_equal(
        columnar.answered(big, imp_at, it_user.astype(np.int64) + 2**61, it_at, 50), want)
