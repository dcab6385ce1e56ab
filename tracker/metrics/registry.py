"""Metric names are data: ``"ndcg@10"`` parses through one registry into a spec.

The same string names the result everywhere (database rows, dashboard, CLI). A name is
``<metric>@<k>`` for metrics with a cutoff and ``<metric>`` alone for the others; k is
written without leading zeros, so each result has exactly one name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from tracker.metrics.average_precision import average_precision_kernel
from tracker.metrics.batch import EncodedLists, Judged, ServedPositions, score_encoded
from tracker.metrics.catalog import CATALOG
from tracker.metrics.encoding import encode
from tracker.metrics.first_hit import mrr_kernel, song_clicks_kernel
from tracker.metrics.hits import (
    hit_rate_kernel,
    precision_kernel,
    r_precision_kernel,
    recall_kernel,
)
from tracker.metrics.ndcg import ndcg_kernel
from tracker.metrics.roc_auc import roc_auc_kernel

Kernel = Callable[[Judged, Any], np.ndarray]


@dataclass(frozen=True)
class MetricSpec:
    """How to compute one named metric from judged lists.

    ``kernel(judged, k)`` returns one value per list. ``takes_k``: the name carries
    ``@k`` and the kernel reads ranks 1..k. Otherwise the kernel reads ranks
    1..``depth`` (``None``: whole lists).
    """

    kernel: Kernel
    takes_k: bool
    depth: int | None = None
    summary: str = ""


def _spec(name: str, kernel: Kernel, depth: int | None = None) -> MetricSpec:
    """The spec of catalogued metric ``name``: its cutoff rule and summary come from
    :data:`~tracker.metrics.catalog.CATALOG`, the kernel from here."""
    entry = CATALOG[name]
    return MetricSpec(kernel, entry.takes_k, depth, summary=entry.description)


# The per-list metrics scored from served lists and ground truth; every name is a catalogue
# entry (the catalogue also holds metrics computed from other inputs: surprisal,
# unexpectedness and the set-level ones).
METRICS: Mapping[str, MetricSpec] = MappingProxyType(
    {
        "hit_rate": _spec("hit_rate", hit_rate_kernel),
        "precision": _spec("precision", precision_kernel),
        "recall": _spec("recall", recall_kernel),
        "mrr": _spec("mrr", mrr_kernel),
        "map": _spec("map", partial(average_precision_kernel, normalization="min_k_relevant")),
        "ndcg": _spec("ndcg", partial(ndcg_kernel, gain="linear")),
        "roc_auc": _spec("roc_auc", roc_auc_kernel),
        "r_precision": _spec("r_precision", r_precision_kernel),
        "song_clicks": _spec(
            "song_clicks", partial(song_clicks_kernel, page_size=10, max_items=500), depth=500
        ),
    }
)

_NAME = re.compile(r"(?P<metric>[a-z_]+)(?:@(?P<k>\d+))?")


class MetricName(NamedTuple):
    """A parsed metric name; ``str()`` gives back the canonical name."""

    metric: str
    k: int | None

    def __str__(self) -> str:
        return self.metric if self.k is None else f"{self.metric}@{self.k}"

    @property
    def spec(self) -> MetricSpec:
        return METRICS[self.metric]

    @property
    def depth(self) -> int | None:
        """The ranks this metric reads (``None``: whole lists)."""
        return self.k if self.spec.takes_k else self.spec.depth


def parse_metric(name: str) -> MetricName:
    """Parse ``"ndcg@10"`` into ``MetricName("ndcg", 10)``; ValueError if it is not a
    registered metric written canonically.

    >>> parse_metric("ndcg@10")
    MetricName(metric='ndcg', k=10)
    >>> parse_metric("r_precision")
    MetricName(metric='r_precision', k=None)
    >>> parse_metric("ndcg")
    Traceback (most recent call last):
    ...
    ValueError: metric 'ndcg' needs a cutoff: write it as 'ndcg@<k>', e.g. 'ndcg@10'
    """
    if not isinstance(name, str):
        raise ValueError(f"a metric name must be a string like 'ndcg@10', got {name!r}")
    match = _NAME.fullmatch(name)
    if match is None or match["metric"] not in METRICS:
        raise ValueError(
            f"unknown metric {name!r}; known metrics: {', '.join(sorted(METRICS))} "
            "(write 'name@k' for those with a cutoff, e.g. 'ndcg@10')"
        )
    metric = match["metric"]
    spec = METRICS[metric]
    if match["k"] is None:
        if spec.takes_k:
            raise ValueError(
                f"metric {name!r} needs a cutoff: write it as '{metric}@<k>', e.g. '{metric}@10'"
            )
        return MetricName(metric, None)
    if not spec.takes_k:
        raise ValueError(f"metric {metric!r} takes no cutoff: write it as {metric!r}")
    k = int(match["k"])
    if k < 1 or match["k"] != str(k):
        raise ValueError(
            f"in {name!r}, k must be an integer >= 1 written without leading zeros"
        )
    return MetricName(metric, k)


def evaluate(recommended: Any, relevant: Any, metrics: Iterable[str] | str) -> dict[str, float]:
    """Mean of each named metric over the lists: ``{"ndcg@10": 0.41, ...}``.

    ``recommended`` and ``relevant`` are as in the per-list functions (ranked lists of
    any hashable ids; collections of relevant ids, or mappings id -> grade). Names:
    hit_rate, precision, recall, mrr, map (average precision, D = min(k, |G|)), ndcg
    (linear gain), roc_auc, all with ``@k``; r_precision and song_clicks (pages of 10,
    500 items) without. The lists are matched once, at the deepest rank any metric
    reads. Each mean equals the mean of the matching per-list function.

    Edge cases: an unknown or malformed name raises ValueError before any work; no
    lists at all raises ValueError (a mean over nothing is undefined).

    >>> evaluate([["a", "b", "c"], ["d", "e"]], [{"c"}, {"d": 3}], ["mrr@3", "hit_rate@1"])
    {'mrr@3': 0.6666666666666666, 'hit_rate@1': 0.5}
    """
    names = _parse_all(metrics)
    depth = _deepest(names)
    lists = encode(recommended, relevant, depth=depth)
    if lists.items.shape[0] == 0:
        raise ValueError("evaluate needs at least one list: a mean over no lists is undefined")
    values = _compute(lists, names, depth)
    return {name: float(value.mean()) for name, value in values.items()}


def evaluate_encoded(
    lists: EncodedLists | ServedPositions,
    metrics: Iterable[str] | str,
    *,
    workers: int | None = None,
) -> dict[str, np.ndarray]:
    """Per-list values of each named metric for integer-coded lists (no hashing).

    The entry point for callers that hold item codes already: build an
    :class:`EncodedLists` (a ``(n_lists, width)`` code matrix padded with -1 plus the
    judgements as (row, item, grade) arrays), or, when the rank of every relevant item
    in its list is known already (the rollup job), a :class:`ServedPositions`; get one
    float64 array of ``n_lists`` values per name. ``evaluate`` is the mean of these.
    ``workers``: threads scoring blocks of lists at once (default: one per CPU, up to
    4, for large batches; pass 1 when the caller runs several batches in parallel).

    >>> import numpy as np
    >>> lists = EncodedLists(
    ...     items=np.array([[10, 11, 12], [13, 14, -1]]),
    ...     truth_row=np.array([0, 1, 1]),
    ...     truth_item=np.array([12, 13, 99]),
    ...     truth_grade=np.array([1.0, 3.0, 1.0]),
    ... )
    >>> out = evaluate_encoded(lists, ["mrr@3", "recall@3"])
    >>> out["mrr@3"], out["recall@3"]
    (array([0.33333333, 1.        ]), array([1. , 0.5]))
    """
    if not isinstance(lists, EncodedLists | ServedPositions):
        raise ValueError(
            "evaluate_encoded takes an EncodedLists or ServedPositions; use evaluate() for id "
            "lists"
        )
    names = _parse_all(metrics)
    depth = _deepest(names)
    return _compute(lists, names, depth, workers)


def _parse_all(metrics: Iterable[str] | str) -> list[MetricName]:
    if isinstance(metrics, str):
        metrics = [metrics]
    names = [parse_metric(name) for name in metrics]
    if not names:
        raise ValueError("no metric names given; e.g. ['ndcg@10', 'map@10']")
    return names


def _deepest(names: list[MetricName]) -> int | None:
    depths = [name.depth for name in names]
    return None if None in depths else max(depths)  # type: ignore[type-var]


def _compute(
    lists: EncodedLists | ServedPositions,
    names: list[MetricName],
    depth: int | None,
    workers: int | None = None,
) -> dict[str, np.ndarray]:
    """Every named metric per list, judging blocks of lists once for all of them."""
    kernels = {str(name): partial(_run, name.spec.kernel, name.k) for name in names}
    return score_encoded(lists, kernels, depth, workers)


def _run(kernel: Kernel, k: int | None, judged: Judged) -> np.ndarray:
    return kernel(judged, k)
