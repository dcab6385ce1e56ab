"""Properties that hold for any input (Hypothesis), and agreement with the naive reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.metrics import reference
from tracker import metrics

AT_K = {
    "hit_rate": metrics.hit_rate, "precision": metrics.precision, "recall": metrics.recall,
    "mrr": metrics.mrr, "map": metrics.average_precision, "ndcg": metrics.ndcg,
    "roc_auc": metrics.roc_auc,
}
NORMALIZATIONS = ("min_k_relevant", "relevant", "hits", "k")

items = st.integers(0, 12)  # a small catalog: overlaps and repeats are common
ranked = st.lists(items, max_size=12)  # repeats and empty lists included
grades = st.sampled_from([0, 1, 2, 3, 0.5])
relevance = st.one_of(st.sets(items, max_size=8),
                      st.dictionaries(items, grades, max_size=8))
cases = st.lists(st.tuples(ranked, relevance), min_size=1, max_size=8)
ks = st.integers(1, 14)
FAST = settings(max_examples=80, deadline=None)


def split(batch):
    return [r for r, _ in batch], [t for _, t in batch]


@FAST
@given(batch=cases, k=ks)
def test_every_metric_equals_the_naive_reference(batch, k):
    served, truth = split(batch)

    def check(got, fn, *args, **kwargs):
        expected = [fn(r, t, *args, **kwargs) for r, t in batch]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12, err_msg=fn.__name__)

    for name, fn in AT_K.items():
        check(fn(served, truth, k), reference.PER_LIST_AT_K[name], k)
    for normalization in NORMALIZATIONS:
        check(metrics.average_precision(served, truth, k, normalization=normalization),
              reference.average_precision, k, normalization)
    check(metrics.ndcg(served, truth, k, gain="exponential"), reference.ndcg, k,
          "exponential")
    check(metrics.r_precision(served, truth), reference.r_precision)
    check(metrics.song_clicks(served, truth), reference.song_clicks)
    page, cap = 1 + k % 4, k
    check(metrics.song_clicks(served, truth, page_size=page, max_items=cap),
          reference.song_clicks, page, cap)


@FAST
@given(served=st.lists(ranked, min_size=1, max_size=6), data=st.data(), k=ks)
def test_unexpectedness_equals_the_naive_reference(served, data, k):
    base = data.draw(st.lists(ranked, min_size=len(served), max_size=len(served)))
    expected = [reference.unexpectedness(r, b, k) for r, b in zip(served, base, strict=True)]
    np.testing.assert_allclose(metrics.unexpectedness(served, base, k), expected, atol=1e-12)


@FAST
@given(batch=cases, k=ks)
def test_values_lie_between_0_and_1(batch, k):
    served, truth = split(batch)
    for name, fn in AT_K.items():
        values = fn(served, truth, k)
        assert np.all((values >= 0) & (values <= 1 + 1e-12)), name
    for normalization in NORMALIZATIONS:
        values = metrics.average_precision(served, truth, k, normalization=normalization)
        assert np.all((values >= 0) & (values <= 1 + 1e-12)), normalization
    values = metrics.ndcg(served, truth, k, gain="exponential")
    assert np.all((values >= 0) & (values <= 1 + 1e-12))
    values = metrics.r_precision(served, truth)
    assert np.all((values >= 0) & (values <= 1))
    values = metrics.unexpectedness(served, served[::-1], k)
    assert np.all((values >= 0) & (values <= 1))
    values = metrics.surprisal(served, k, {i: i % 5 for i in range(13)}, 5)
    assert np.all((values >= 0) & (values <= 1 + 1e-12))
    clicks = metrics.song_clicks(served, truth)
    assert np.all((clicks >= 0) & (clicks <= 51) & (clicks == np.floor(clicks)))
    assert 0 <= metrics.coverage(served, k, 13) <= 1
    assert 0 <= metrics.gini_index(served, k, 13) < 1


@FAST
@given(truth=st.sets(items, min_size=1, max_size=8), rest=st.lists(items, max_size=6),
       extra=st.integers(0, 4), data=st.data())
def test_a_perfect_ranking_scores_1(truth, rest, extra, data):
    ordered = data.draw(st.permutations(sorted(truth)))
    served = [[*ordered, *rest]]  # every relevant item first, then anything
    k = len(truth) + extra
    for name in ("hit_rate", "recall", "mrr", "map", "ndcg", "roc_auc"):
        assert AT_K[name](served, [truth], k)[0] == pytest.approx(1.0), name
    for normalization in ("min_k_relevant", "relevant", "hits"):
        assert metrics.average_precision(served, [truth], k, normalization)[0] == \
            pytest.approx(1.0)
    assert metrics.r_precision(served, [truth])[0] == pytest.approx(1.0)
    assert metrics.song_clicks(served, [truth])[0] == 0
    short = data.draw(st.integers(1, len(truth)))  # k <= |G|: the top k is all relevant
    for name in ("precision", "map", "ndcg", "hit_rate", "mrr"):
        assert AT_K[name](served, [truth], short)[0] == pytest.approx(1.0), name


@FAST
@given(truth=st.dictionaries(items, st.integers(1, 5), min_size=1, max_size=8),
       rest=st.lists(items, max_size=4), k=ks)
def test_a_ranking_by_grade_is_ideal(truth, rest, k):
    served = [[*sorted(truth, key=lambda i: -truth[i]), *rest]]
    for gain in ("linear", "exponential"):
        assert metrics.ndcg(served, [truth], k, gain=gain)[0] == pytest.approx(1.0)


@FAST
@given(served=ranked, truth=relevance, k=st.integers(1, 8), data=st.data())
def test_permuting_the_items_beyond_k_changes_nothing(served, truth, k, data):
    shuffled = served[:k] + data.draw(st.permutations(served[k:]))
    for name, fn in AT_K.items():
        assert fn([served], [truth], k)[0] == fn([shuffled], [truth], k)[0], name
    assert metrics.ndcg([served], [truth], k, gain="exponential")[0] == \
        metrics.ndcg([shuffled], [truth], k, gain="exponential")[0]
    base = [sorted(truth)]
    assert metrics.unexpectedness([served], base, k)[0] == \
        metrics.unexpectedness([shuffled], base, k)[0]


@FAST
@given(batch=st.lists(st.tuples(ranked, st.sets(items, max_size=8)), min_size=1, max_size=8),
       k=ks)
def test_binary_relevance_equals_graded_relevance_with_all_grades_1(batch, k):
    served, as_sets = split(batch)
    as_ones = [dict.fromkeys(t, 1) for t in as_sets]
    for name, fn in AT_K.items():
        np.testing.assert_array_equal(fn(served, as_sets, k), fn(served, as_ones, k),
                                      err_msg=name)
    np.testing.assert_array_equal(metrics.ndcg(served, as_sets, k, gain="exponential"),
                                  metrics.ndcg(served, as_ones, k, gain="exponential"))
    np.testing.assert_array_equal(metrics.r_precision(served, as_sets),
                                  metrics.r_precision(served, as_ones))


@FAST
@given(batch=cases, k=ks)
def test_a_batch_equals_its_lists_one_by_one(batch, k):
    served, truth = split(batch)
    names = [f"{m}@{k}" for m in AT_K] + ["r_precision", "song_clicks"]
    together = metrics.evaluate_encoded(metrics.encode(served, truth), names)
    for i, (r, t) in enumerate(batch):
        alone = metrics.evaluate_encoded(metrics.encode([r], [t]), names)
        for name in names:  # equal up to rounding (matrix products of other shapes)
            assert together[name][i] == pytest.approx(alone[name][0], rel=1e-12), name
    for name, fn in AT_K.items():
        np.testing.assert_allclose(fn(served, truth, k), together[f"{name}@{k}"], rtol=1e-12)
    means = metrics.evaluate(served, truth, names)
    for name in names:
        assert means[name] == pytest.approx(float(np.mean(together[name])), abs=1e-12)


@FAST
@given(served=st.lists(ranked, max_size=6), k=ks)
def test_catalog_measures_ignore_the_order_of_the_lists(served, k):
    flipped = served[::-1]
    assert metrics.coverage(served, k, 13) == metrics.coverage(flipped, k, 13)
    assert metrics.gini_index(served, k, 13) == pytest.approx(metrics.gini_index(flipped, k, 13))
    entropy = metrics.entropy(served, k)
    shown = {i for r in served for i in r[:k]}
    assert 0 <= entropy <= math.log2(max(len(shown), 1)) + 1e-12
