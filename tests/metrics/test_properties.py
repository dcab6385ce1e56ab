"""Properties that must hold for any input (Hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker import metrics

BOUNDED = {
    "hit_rate": metrics.hit_rate, "precision": metrics.precision, "recall": metrics.recall,
    "mrr": metrics.mrr, "map": metrics.average_precision, "ndcg": metrics.ndcg,
    "roc_auc": metrics.roc_auc,
}

items = st.integers(0, 30)
ranked = st.lists(items, min_size=1, max_size=12, unique=True)
truths = st.dictionaries(items, st.integers(1, 3), max_size=8)
cases = st.lists(st.tuples(ranked, truths), min_size=1, max_size=8)
ks = st.integers(1, 15)


@settings(max_examples=150, deadline=None)
@given(cases=cases, k=ks)
def test_values_lie_in_0_1(cases, k):
    recommended = [r for r, _ in cases]
    relevant = [t for _, t in cases]
    for name, fn in BOUNDED.items():
        values = fn(recommended, relevant, k)
        assert np.all((values >= 0) & (values <= 1 + 1e-12)), name
    assert np.all(metrics.r_precision(recommended, relevant) <= 1)


@settings(max_examples=150, deadline=None)
@given(truth=st.sets(items, min_size=1, max_size=6), rest=st.lists(items, max_size=6),
       extra=st.integers(0, 5))
def test_a_perfect_ranking_scores_1(truth, rest, extra):
    ordered = sorted(truth)
    recommended = ordered + [i for i in dict.fromkeys(rest) if i not in truth]
    k = len(truth) + extra
    for fn in (metrics.hit_rate, metrics.recall, metrics.mrr, metrics.ndcg,
               metrics.average_precision):
        assert fn([recommended], [truth], k)[0] == pytest.approx(1.0), fn.__name__
    assert metrics.r_precision([recommended], [truth])[0] == pytest.approx(1.0)


@settings(max_examples=150, deadline=None)
@given(case=st.tuples(ranked, truths), k=st.integers(1, 6), data=st.data())
def test_permuting_items_beyond_k_changes_nothing(case, k, data):
    recommended, truth = case
    tail = data.draw(st.permutations(recommended[k:]))
    shuffled = recommended[:k] + list(tail)
    for name, fn in BOUNDED.items():
        assert fn([recommended], [truth], k)[0] == fn([shuffled], [truth], k)[0], name


@settings(max_examples=150, deadline=None)
@given(cases=cases, k=ks)
def test_binary_relevance_equals_graded_with_all_grades_1(cases, k):
    recommended = [r for r, _ in cases]
    as_sets = [set(t) for _, t in cases]
    as_ones = [dict.fromkeys(t, 1) for _, t in cases]
    for name, fn in BOUNDED.items():
        np.testing.assert_array_equal(fn(recommended, as_sets, k), fn(recommended, as_ones, k),
                                      err_msg=name)


@settings(max_examples=100, deadline=None)
@given(cases=cases, k=ks)
def test_a_batch_equals_its_lists_one_by_one(cases, k):
    recommended = [r for r, _ in cases]
    relevant = [t for _, t in cases]
    names = [f"{m}@{k}" for m in ("hit_rate", "precision", "recall", "mrr", "map", "ndcg",
                                  "roc_auc")] + ["r_precision", "song_clicks"]
    batch = metrics.evaluate(recommended, relevant, names)
    for name in names:
        single = [metrics.evaluate([r], [t], [name])[name] for r, t in cases]
        assert batch[name] == pytest.approx(float(np.mean(single)), rel=1e-12, abs=1e-12), name
