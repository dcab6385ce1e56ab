"""Ranking and catalog metrics over arrays: pure numpy, no database.

Per-list metrics take ``recommended`` (a sequence of ranked lists of item ids, any
hashable) and ``relevant`` (one entry per list: a collection of relevant ids, or a
mapping id -> grade >= 0) and return one float per list::

    from tracker import metrics
    metrics.ndcg(recommended, relevant, k=10)
    metrics.evaluate(recommended, relevant, ["ndcg@10", "map@10", "r_precision"])

Callers holding integer item codes (the rollup) skip the id hashing with
:class:`EncodedLists` (or :class:`ServedPositions` when the rank of each relevant item
is known) and :func:`evaluate_encoded`. How a batch is computed:
:mod:`tracker.metrics.batch`. Every metric's kind, group, direction, range and formula:
:data:`CATALOG` (:mod:`tracker.metrics.catalog`).
"""

from tracker.metrics.average_precision import average_precision
from tracker.metrics.batch import EncodedLists, ServedPositions
from tracker.metrics.catalog import CATALOG, Direction, Group, Kind, MetricInfo
from tracker.metrics.encoding import encode
from tracker.metrics.exposure import coverage, entropy, gini_index
from tracker.metrics.first_hit import mrr, song_clicks
from tracker.metrics.hits import hit_rate, precision, r_precision, recall
from tracker.metrics.ndcg import ndcg
from tracker.metrics.novelty import novelty, surprisal
from tracker.metrics.registry import (
    METRICS,
    MetricName,
    MetricSpec,
    evaluate,
    evaluate_encoded,
    parse_metric,
)
from tracker.metrics.roc_auc import roc_auc
from tracker.metrics.unexpectedness import unexpectedness

__all__ = [
    "CATALOG",
    "METRICS",
    "Direction",
    "EncodedLists",
    "Group",
    "Kind",
    "MetricInfo",
    "MetricName",
    "MetricSpec",
    "ServedPositions",
    "average_precision",
    "coverage",
    "encode",
    "entropy",
    "evaluate",
    "evaluate_encoded",
    "gini_index",
    "hit_rate",
    "mrr",
    "ndcg",
    "novelty",
    "parse_metric",
    "precision",
    "r_precision",
    "recall",
    "roc_auc",
    "song_clicks",
    "surprisal",
    "unexpectedness",
]
