"""Cross-check against ranx (a trusted reference; a test-only dependency) on random data."""

from __future__ import annotations

import numpy as np
import pytest

from tracker import metrics

ranx = pytest.importorskip("ranx")

PAIRS = [  # ours, ranx's name (ranx's "map" divides by |G|: normalization="relevant")
    ("hit_rate", "hit_rate"), ("precision", "precision"), ("recall", "recall"),
    ("mrr", "mrr"), ("ndcg", "ndcg"), ("ap_relevant", "map"),
]


def _random_lists(seed: int, n: int = 300):
    rng = np.random.default_rng(seed)
    recommended, relevant = [], []
    for _ in range(n):
        length = int(rng.integers(1, 15))
        recommended.append([f"d{i}" for i in rng.choice(40, length, replace=False)])
        size = int(rng.integers(1, 8))  # ranx drops queries without judgements
        relevant.append({f"d{i}": int(g) for i, g in zip(rng.choice(40, size, replace=False),
                                                           rng.integers(1, 4, size),
                                                           strict=True)})
    return recommended, relevant


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("k", [1, 3, 10])
def test_per_list_values_equal_ranx(seed, k):
    recommended, relevant = _random_lists(seed)
    qrels = ranx.Qrels({f"q{i:04d}": g for i, g in enumerate(relevant)})
    run = ranx.Run({f"q{i:04d}": {item: float(len(r) - j) for j, item in enumerate(r)}
                    for i, r in enumerate(recommended)})
    names = [f"{theirs}@{k}" for _, theirs in PAIRS]  # per query, in sorted query-id order
    expected = ranx.evaluate(qrels, run, names, return_mean=False, make_comparable=True)
    ours = {
        "hit_rate": metrics.hit_rate(recommended, relevant, k),
        "precision": metrics.precision(recommended, relevant, k),
        "recall": metrics.recall(recommended, relevant, k),
        "mrr": metrics.mrr(recommended, relevant, k),
        "ndcg": metrics.ndcg(recommended, relevant, k),  # linear gain, like ranx's ndcg
        "ap_relevant": metrics.average_precision(recommended, relevant, k,
                                                 normalization="relevant"),
    }
    for mine, theirs in PAIRS:
        np.testing.assert_allclose(ours[mine], np.asarray(expected[f"{theirs}@{k}"]),
                                   rtol=0, atol=1e-9, err_msg=mine)
