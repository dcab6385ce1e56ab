"""Cross-check against ranx (a trusted reference; a test-only dependency) on random data."""

from __future__ import annotations

import numpy as np
import pytest

from tracker import metrics

ranx = pytest.importorskip("ranx")

# ours -> ranx's name for the same quantity; ranx's "map" divides by |G|, i.e. our
# normalization="relevant", and its "ndcg" uses linear gain with the ideal list of all qrels.
OURS = {
    "hit_rate": metrics.hit_rate,
    "precision": metrics.precision,
    "recall": metrics.recall,
    "mrr": metrics.mrr,
    "ndcg": metrics.ndcg,
    "map": lambda served, truth, k: metrics.average_precision(served, truth, k,
                                                             normalization="relevant"),
}


def random_lists(seed: int, graded: bool, n: int = 400):
    """Lists of 1..14 distinct items from a catalog of 40, 1..8 relevant items each
    (ranx drops queries without judgements, so every list has some)."""
    rng = np.random.default_rng(seed)
    served, truth = [], []
    for _ in range(n):
        length, size = int(rng.integers(1, 15)), int(rng.integers(1, 9))
        served.append([f"d{i}" for i in rng.choice(40, length, replace=False)])
        relevant = [f"d{i}" for i in rng.choice(40, size, replace=False)]
        grades = rng.integers(1, 4, size) if graded else np.ones(size, dtype=int)
        truth.append({item: int(g) for item, g in zip(relevant, grades, strict=True)})
    return served, truth


@pytest.fixture(scope="module", params=[False, True], ids=["binary", "graded"])
def ranx_case(request):
    served, truth = random_lists(seed=11 + request.param, graded=request.param)
    ids = [f"q{i:04d}" for i in range(len(served))]  # sorted = list order
    qrels = ranx.Qrels({q: t for q, t in zip(ids, truth, strict=True)})
    # strictly decreasing scores: ranx ranks exactly our order
    run = ranx.Run({q: {item: float(len(r) - j) for j, item in enumerate(r)}
                    for q, r in zip(ids, served, strict=True)})
    return served, truth, qrels, run


@pytest.mark.parametrize("k", [1, 3, 10, 20], ids=lambda k: f"k{k}")
def test_per_list_values_equal_ranx(ranx_case, k):
    served, truth, qrels, run = ranx_case
    names = [f"{name}@{k}" for name in OURS]
    theirs = ranx.evaluate(qrels, run, names, return_mean=False, make_comparable=True)
    for name, fn in OURS.items():
        np.testing.assert_allclose(fn(served, truth, k), np.asarray(theirs[f"{name}@{k}"]),
                                   rtol=0, atol=1e-9, err_msg=f"{name}@{k}")
