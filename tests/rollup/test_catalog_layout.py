"""The rollup computes exactly the catalogue's metrics, and the stored column order did not move
when the names started coming from the catalogue."""

from __future__ import annotations

from tests.rollup.scenario import create, make_logs
from tests.rollup.test_rollup import NOW
from tracker.metrics.catalog import CATALOG
from tracker.rollup.outcomes import Layout

# The per-impression value columns as stored before the catalogue existed (unit totals were
# positional then; since 0008 they are stored by name, tests/rollup/test_state.py).
PER_K = ("hit_rate", "precision", "recall", "mrr", "map", "ndcg", "roc_auc", "surprisal",
         "unexpectedness")


def test_layout_order_is_the_one_stored_before_the_catalogue():
    expected = [(m, k) for k in (5, 10, 20) for m in PER_K]
    expected += [("r_precision", 0), ("song_clicks", 0)]
    assert list(Layout.for_cutoffs([5, 10, 20]).columns) == expected


def test_the_rollup_computes_every_catalogued_metric_once_and_nothing_else(tracker):
    create(tracker)
    imps, events = make_logs(3)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    table = tracker.metric_table("home", cumulative=True)
    stored = table[["metric", "kind"]].drop_duplicates()
    assert sorted(stored.itertuples(index=False, name=None)) == sorted(
        (m.name, m.kind.value) for m in CATALOG.values())
    for metric, ks in table.groupby("metric")["k"]:
        assert bool(ks.notna().all()) is CATALOG[metric].takes_k, metric  # k iff a cutoff
