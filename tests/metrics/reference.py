"""A naive reference: every per-list metric written straight from its formula in issue 3.

One list at a time, plain Python loops, nothing shared with ``tracker.metrics`` (no
encoding, no matrix): the property tests compare the vectorised kernel against it on
random data. Each function takes one ranked list and its relevance (a collection of
ids, or a mapping id -> grade) and returns a float.
"""

from __future__ import annotations

import math
from collections.abc import Mapping


def grades_of(relevant) -> dict:
    """G as {item: grade > 0} (binary relevance is grade 1)."""
    if isinstance(relevant, Mapping):
        return {item: float(g) for item, g in relevant.items() if g > 0}
    return {item: 1.0 for item in relevant}


def rels(ranked, relevant, k) -> list[float]:
    """rel_i for ranks 1..min(k, len): the grade, 0 if not relevant or a repeat."""
    grades, seen, out = grades_of(relevant), set(), []
    for item in ranked[:k]:
        out.append(0.0 if item in seen else grades.get(item, 0.0))
        seen.add(item)
    return out


def hit_rate(ranked, relevant, k) -> float:
    return 1.0 if any(r > 0 for r in rels(ranked, relevant, k)) else 0.0


def precision(ranked, relevant, k) -> float:
    return sum(r > 0 for r in rels(ranked, relevant, k)) / k


def recall(ranked, relevant, k) -> float:
    size = len(grades_of(relevant))
    return sum(r > 0 for r in rels(ranked, relevant, k)) / size if size else 0.0


def mrr(ranked, relevant, k) -> float:
    for rank, r in enumerate(rels(ranked, relevant, k), start=1):
        if r > 0:
            return 1.0 / rank
    return 0.0


def average_precision(ranked, relevant, k, normalization="min_k_relevant") -> float:
    hits, total = 0, 0.0
    for rank, r in enumerate(rels(ranked, relevant, k), start=1):
        if r > 0:
            hits += 1
            total += hits / rank
    size = len(grades_of(relevant))
    denominator = {"min_k_relevant": min(k, size), "relevant": size, "hits": hits,
                   "k": k}[normalization]
    return total / denominator if denominator else 0.0


def ndcg(ranked, relevant, k, gain="linear") -> float:
    def g(rel):
        return rel if gain == "linear" else 2.0**rel - 1.0

    dcg = sum(g(r) / math.log2(i + 1) for i, r in enumerate(rels(ranked, relevant, k), 1))
    ideal = sorted(grades_of(relevant).values(), reverse=True)[:k]
    idcg = sum(g(r) / math.log2(i + 1) for i, r in enumerate(ideal, 1))
    return dcg / idcg if idcg else 0.0


def r_precision(ranked, relevant) -> float:
    size = len(grades_of(relevant))
    if not size:
        return 0.0
    return sum(r > 0 for r in rels(ranked, relevant, size)) / size


def song_clicks(ranked, relevant, page_size=10, max_items=500) -> float:
    for rank, r in enumerate(rels(ranked, relevant, max_items), start=1):
        if r > 0:
            return float((rank - 1) // page_size)
    return float(math.ceil(max_items / page_size) + 1)


def roc_auc(ranked, relevant, k) -> float:
    flags = [r > 0 for r in rels(ranked, relevant, k)]
    positives = [i for i, f in enumerate(flags) if f]
    negatives = [i for i, f in enumerate(flags) if not f]
    if not positives:
        return 0.0
    if not negatives:
        return 1.0
    ordered = sum(p < n for p in positives for n in negatives)
    return ordered / (len(positives) * len(negatives))


def unexpectedness(ranked, baseline, k) -> float:
    if not ranked:
        return 0.0
    return 1.0 - len(set(ranked[:k]) & set(baseline[:k])) / k


PER_LIST_AT_K = {
    "hit_rate": hit_rate,
    "precision": precision,
    "recall": recall,
    "mrr": mrr,
    "map": average_precision,
    "ndcg": ndcg,
    "roc_auc": roc_auc,
}
