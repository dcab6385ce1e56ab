"""Metric names are data: one registry parses them, evaluate averages the per-list values."""

from __future__ import annotations

from math import log2

import pytest

from tracker import metrics


@pytest.mark.parametrize(("name", "parsed"), [
    pytest.param("ndcg@10", ("ndcg", 10), id="metric-at-k"),
    pytest.param("map@5", ("map", 5), id="map-is-average-precision"),
    pytest.param("r_precision", ("r_precision", None), id="no-cutoff"),
    pytest.param("song_clicks", ("song_clicks", None), id="song-clicks-no-cutoff"),
])
def test_names_parse_and_print_back(name, parsed):
    assert tuple(metrics.parse_metric(name)) == parsed
    assert str(metrics.parse_metric(name)) == name


@pytest.mark.parametrize(("name", "match"), [
    pytest.param("ndcg", "needs a cutoff", id="missing-k"),
    pytest.param("r_precision@5", "takes no cutoff", id="unexpected-k"),
    pytest.param("ndcg@0", "k must be an integer >= 1", id="k-0"),
    pytest.param("ndcg@010", "without leading zeros", id="leading-zero"),
    pytest.param("ndcg@-1", "unknown metric", id="negative-k"),
    pytest.param("NDCG@10", "unknown metric", id="names-are-lower-case"),
    pytest.param("bogus@3", "unknown metric", id="unknown-name"),
    pytest.param("ndcg@10 ", "unknown metric", id="trailing-space"),
    pytest.param(10, "must be a string", id="not-a-string"),
])
def test_malformed_names_are_refused(name, match):
    with pytest.raises(ValueError, match=match):
        metrics.parse_metric(name)


def test_every_name_of_the_issue_is_registered():
    assert set(metrics.METRICS) >= {"hit_rate", "precision", "recall", "mrr", "map", "ndcg",
                                    "r_precision", "song_clicks", "roc_auc"}


def test_evaluate_averages_over_lists_by_hand():
    served = [["a", "b"], ["c", "d"]]
    truth = [{"b"}, {"x"}]
    got = metrics.evaluate(served, truth, ["ndcg@2", "hit_rate@1", "hit_rate@2", "map@2",
                                           "r_precision", "song_clicks", "mrr@2"])
    assert got == pytest.approx({
        "ndcg@2": (1 / log2(3) + 0) / 2,  # b at rank 2, ideal 1
        "hit_rate@1": 0.0,
        "hit_rate@2": 0.5,
        "map@2": ((1 / 2) / 1 + 0) / 2,  # P@2 at the hit, D = min(2, 1)
        "r_precision": 0.0,  # R_1 = [a] and [c]
        "song_clicks": (0 + 51) / 2,
        "mrr@2": (1 / 2 + 0) / 2,
    })
    assert list(got) == ["ndcg@2", "hit_rate@1", "hit_rate@2", "map@2", "r_precision",
                         "song_clicks", "mrr@2"]


def test_map_uses_the_default_normalization():
    served, truth = [["a", "x"]], [{"a", "b", "c"}]
    assert metrics.evaluate(served, truth, "map@2")["map@2"] == pytest.approx(
        metrics.average_precision(served, truth, 2, normalization="min_k_relevant")[0])


def test_evaluate_refuses_bad_names_before_any_work_and_needs_lists():
    with pytest.raises(ValueError, match="unknown metric"):
        metrics.evaluate([["a"]], [{"a"}], ["ndcg@2", "bogus@3"])
    with pytest.raises(ValueError, match="no metric names"):
        metrics.evaluate([["a"]], [{"a"}], [])
    with pytest.raises(ValueError, match="at least one list"):
        metrics.evaluate([], [], ["ndcg@2"])
