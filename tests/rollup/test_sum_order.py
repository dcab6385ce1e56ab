"""A user's day is summed in the order its lists arrived: the known gap in issue 31's
"exactly, whatever the order of arrival".

A user's per-list values are added up per (user, cell) with ``numpy.bincount`` in the order
the day's chunks return the lists (by impression id on SQLite, which the order of arrival
sets), and float addition is not associative. The cell-level sums are exact
(:mod:`tracker.rollup.accumulate`) but they add the users' rounded sums, so the same lists
logged in another order can differ in the last bit. This test pins the smallest case (1/3,
1/4 and 1/5 of one user, as reciprocal ranks) so that the gap stays visible and so that the
fix turns it into a plain pass. On PostgreSQL the chunk's read goes through the
(experiment, served_at) index with these few rows, which returns the lists in time order
either way: it passes there, by the plan rather than by design.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import BACKEND, fresh_database, migrated
from tracker import Tracker

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
NOW = datetime(2026, 11, 20, tzinfo=UTC)
ITEMS = [f"i{n}" for n in range(5)]


TREATMENT = {"impression_id": "imp-t", "experiment": "home", "arm": "treatment",
             "user_id": "u2", "items": ITEMS, "served_at": T0}
"""A treatment user, logged first, so that both arms have users."""


def _lists(ranks: list[int]) -> list[dict]:
    """One list of the control user per rank, served an hour apart, in ``ranks``' order."""
    return [{"impression_id": f"imp-{r}", "experiment": "home", "arm": "control",
             "user_id": "u1", "items": ITEMS, "served_at": T0 + timedelta(hours=r)}
            for r in ranks]


def _mrr(url: str, batches: list[list[int]]) -> list[float]:
    """The control arm's daily mrr@5 sum and mean after one ``--full`` of the lists logged
    in ``batches``, each list clicked at its rank."""
    clicks = [{"event_id": f"e{r}", "user_id": "u1", "item_id": ITEMS[r - 1], "event": "click",
               "impression_id": f"imp-{r}",
               "occurred_at": T0 + timedelta(hours=r, minutes=1)} for r in (3, 4, 5)]
    with Tracker(migrated(url)) as tracker:
        tracker.create_experiment("home", arms={"control": 0.5, "treatment": 0.5},
                                  control="control", attribution_window=timedelta(hours=1),
                                  cutoffs=(5,), cuped_days=0)
        tracker.log_impressions([TREATMENT], on_invalid="all_or_nothing")
        for batch in batches:
            tracker.log_impressions(_lists(batch), on_invalid="all_or_nothing")
        tracker.log_interactions(clicks, on_invalid="all_or_nothing")
        tracker.rollup("home", full=True, now=NOW)
        table = tracker.metric_table("home")
    row = table[(table.metric == "mrr") & (table.arm == "control")]
    return [*row["sum"].tolist(), *row["mean"].tolist()]


def test_the_same_lists_logged_in_another_order_give_the_same_bits(tmp_path):
    with fresh_database(tmp_path) as first, fresh_database(tmp_path) as second:
        in_order = _mrr(first, [[3, 4, 5]])
        later = _mrr(second, [[3, 5], [4]])
    # one user, the mean of their three lists' reciprocal ranks
    assert in_order == pytest.approx([(1 / 3 + 1 / 4 + 1 / 5) / 3] * 2, rel=1e-15)
    assert later == pytest.approx(in_order, rel=1e-15)
    if BACKEND == "sqlite" and later != in_order:
        pytest.xfail("a user's day adds up in the order of arrival (a chunk's bincount, the "
                     f"chunks by id): {in_order} against {later}, the known gap of issue 31")
    assert later == in_order  # to the bit
