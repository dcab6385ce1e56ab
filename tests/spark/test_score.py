"""Per-list metrics on Spark (local[2]) through the tracker.metrics kernels: each list's
values equal tracker.metrics.evaluate on that list alone, to 1e-12."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import BACKEND
from tests.spark.support import SKIP_REASON
from tracker.metrics import evaluate

pytestmark = [pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON)),
              pytest.mark.skipif(BACKEND != "sqlite", reason="no database is read: once")]

METRICS = ["ndcg@5", "ndcg@10", "map@5", "mrr@10", "hit_rate@3", "precision@5", "recall@5",
           "roc_auc@10", "r_precision", "song_clicks"]


def generated(seed: int = 7, lists: int = 400) -> list[dict]:
    """Lists of 1 to 12 distinct items out of 40, for 60 users; judgements of items in and
    out of the list, graded 0 to 3, sometimes none at all."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in range(lists):
        items = [f"item-{i}" for i in rng.choice(40, size=rng.integers(1, 13), replace=False)]
        judged = rng.choice(40, size=rng.integers(0, 6), replace=False)
        relevant = [{"item": f"item-{i}", "grade": float(rng.integers(0, 4))} for i in judged]
        rows.append({"impression_id": f"imp-{n}", "user_id": f"user-{rng.integers(60)}",
                     "items": items, "relevant": relevant if relevant or n % 2 else None})
    return rows


def test_each_list_scores_as_evaluate_scores_it(spark):
    from tracker.spark.score import score_lists

    rows = generated()
    frame = spark.createDataFrame(
        rows, "impression_id string, user_id string, items array<string>, "
              "relevant array<struct<item: string, grade: double>>")
    got = {row["impression_id"]: row.asDict()
           for row in score_lists(frame, METRICS, buckets=8).collect()}
    assert set(got) == {row["impression_id"] for row in rows}
    for row in rows:
        grades = {pair["item"]: pair["grade"] for pair in row["relevant"] or []}
        expected = evaluate([row["items"]], [grades], METRICS)
        for name in METRICS:
            assert got[row["impression_id"]][name] == pytest.approx(expected[name], abs=1e-12,
                                                                    rel=1e-12), name


def test_an_unknown_metric_or_a_missing_column_fails_before_any_job(spark):
    from tracker.spark.score import score_lists

    frame = spark.createDataFrame([("a", "u", ["x"])], "impression_id string, user_id string, "
                                                      "items array<string>")
    with pytest.raises(ValueError, match="relevant"):
        score_lists(frame, ["ndcg@5"])
    with pytest.raises(ValueError, match="nope"):
        score_lists(frame, ["nope@5"])
