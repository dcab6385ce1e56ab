"""The metric catalogue: one honest entry per metric, which the registry and the readers share."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker import metrics
from tracker.metrics import catalog
from tracker.metrics.catalog import CATALOG, Direction, Group, Kind


@pytest.mark.parametrize(("name", "direction", "kind", "group", "takes_k"), [
    pytest.param("ndcg", "higher", "user", "ranking", True, id="ndcg-higher-is-better"),
    pytest.param("hit_rate", "higher", "user", "online", True, id="hit-rate-online-higher"),
    pytest.param("song_clicks", "lower", "user", "online", False,
                 id="song-clicks-fewer-refreshes-are-better"),
    pytest.param("r_precision", "higher", "user", "ranking", False, id="r-precision-no-cutoff"),
    pytest.param("coverage", "higher", "set", "online", True, id="coverage-set-level-higher"),
    pytest.param("gini", "lower", "set", "beyond_accuracy", True,
                 id="gini-lower-is-more-even-exposure"),
    pytest.param("entropy", "higher", "set", "beyond_accuracy", True,
                 id="entropy-higher-is-more-diverse"),
    pytest.param("unexpectedness", "higher", "user", "beyond_accuracy", True,
                 id="unexpectedness-higher"),
])
def test_known_metrics_are_described_as_checked_by_hand(name, direction, kind, group, takes_k):
    entry = CATALOG[name]
    assert (entry.direction, entry.kind, entry.group, entry.takes_k) == (
        Direction(direction), Kind(kind), Group(group), takes_k)


def test_lower_is_better_is_exactly_song_clicks_and_gini():
    assert catalog.lower_is_better() == {"song_clicks", "gini"}


def test_every_registered_kernel_has_one_entry_with_the_same_cutoff_rule():
    for name, spec in metrics.METRICS.items():
        assert name in CATALOG, name
        assert spec.takes_k is CATALOG[name].takes_k, name
        assert CATALOG[name].kind is Kind.USER, name


def test_metrics_without_a_cutoff_are_all_scored_by_a_registered_kernel():
    # the rollup scores every per-user whole-list metric through the registry
    assert set(catalog.names(kind=Kind.USER, takes_k=False)) <= set(metrics.METRICS)


def test_display_order_holds_every_metric_once_grouped():
    order = catalog.display_order()
    assert sorted(order) == sorted(CATALOG)
    groups = [CATALOG[name].group for name in order]
    assert groups == sorted(groups, key=catalog.GROUPS.index)


@pytest.mark.parametrize("entry", list(CATALOG.values()), ids=lambda e: e.name)
def test_each_entry_is_complete_and_its_formula_is_markdown_not_a_doctest(entry):
    assert entry.description.endswith(".") and "\n" not in entry.description
    assert entry.formula and ">>>" not in entry.formula and "$" in entry.formula
    assert entry.formula.count("$") % 2 == 0  # every LaTeX span is closed
    assert entry.reference
    assert entry.low is None or entry.high is None or entry.low < entry.high


@pytest.mark.parametrize(("name", "k", "label"), [
    pytest.param("ndcg", 10, "ndcg@10", id="cutoff-written-after-at"),
    pytest.param("song_clicks", 10, "song_clicks", id="no-cutoff-ignores-k"),
    pytest.param("coverage", 5, "coverage@5", id="set-level-with-cutoff"),
])
def test_labels_are_the_names_results_carry(name, k, label):
    assert CATALOG[name].label(k) == label


def test_an_unknown_name_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown metric 'ndgc'; known metrics: hit_rate, "):
        catalog.info("ndgc")
    assert catalog.info("ndcg") is CATALOG["ndcg"]


lists = st.lists(st.lists(st.integers(0, 30), min_size=0, max_size=12, unique=True),
                 min_size=1, max_size=8)


def _within(entry: catalog.MetricInfo, values) -> bool:
    values = np.atleast_1d(np.asarray(values, dtype=float))
    low = -np.inf if entry.low is None else entry.low
    high = np.inf if entry.high is None else entry.high
    return bool(np.all((values >= low) & (values <= high)))


@settings(max_examples=60, deadline=None)
@given(served=lists, data=st.data(), k=st.integers(1, 15))
def test_every_registered_metric_stays_in_its_catalogued_range(served, data, k):
    truth = [data.draw(st.dictionaries(st.integers(0, 30), st.integers(0, 3), max_size=6))
             for _ in served]
    for name, spec in metrics.METRICS.items():
        full = f"{name}@{k}" if spec.takes_k else name
        values = metrics.evaluate_encoded(metrics.encode(served, truth, depth=None), [full])
        assert _within(CATALOG[name], values[full]), (full, values[full])


@settings(max_examples=60, deadline=None)
@given(served=lists, k=st.integers(1, 15))
def test_set_level_metrics_stay_in_their_catalogued_ranges(served, k):
    catalog_items = list(range(31))
    assert _within(CATALOG["coverage"], metrics.coverage(served, k, catalog_items))
    assert _within(CATALOG["gini"], metrics.gini_index(served, k, catalog_items))
    assert _within(CATALOG["entropy"], metrics.entropy(served, k))


def test_song_clicks_reaches_the_top_of_its_range_when_nothing_is_found():
    value = metrics.song_clicks([list(range(500))], [{"absent"}])[0]
    assert value == CATALOG["song_clicks"].high == 51
