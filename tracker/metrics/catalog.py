"""The metric catalogue: every metric the tracker computes, listed once, with what a reader
needs to interpret it.

Everything that lists metric names reads :data:`CATALOG`: the registry of per-list kernels
(:mod:`tracker.metrics.registry`), the rollup's stored column layout, the report's grouping,
labels and verdict directions, the dashboard and its glossary. Adding a metric means one entry
here plus its kernel.

Rules of the catalogue:

- **Order is storage.** The rollup's per-user value columns follow this catalogue's order
  (for each cutoff the per-user metrics with a cutoff, then those without; see
  ``tracker.rollup.outcomes.Layout``), and its stored unit totals are positional: never
  reorder entries, append new ones at the end (a new metric changes the layout: run
  ``tracker rollup --full``). Display order is separate: :func:`display_order` sorts by
  :data:`GROUPS`, then by catalogue order.
- ``kind``: ``user`` metrics are a mean over users of each user's mean over their
  impressions (they get intervals and tests); ``set`` metrics are one number for an arm's
  whole set of lists (coverage, Gini, entropy), so no test backs a verdict on them.
- ``direction``: whether a higher or a lower value is the better outcome.
- ``low``/``high``: the range a value can take (``None``: unbounded on that side).
- ``formula``: Markdown with LaTeX between ``$...$`` (the dashboard's glossary renders it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class Kind(StrEnum):
    """Per-user (a mean over users, tested) or set-level (one value per arm, not tested)."""

    USER = "user"
    SET = "set"

    @property
    def label(self) -> str:
        return {Kind.USER: "per-user", Kind.SET: "set-level"}[self]


class Group(StrEnum):
    """What a metric tells: online behaviour, ranking quality, or beyond accuracy."""

    ONLINE = "online"
    RANKING = "ranking"
    BEYOND_ACCURACY = "beyond_accuracy"

    @property
    def label(self) -> str:
        return {Group.ONLINE: "Online", Group.RANKING: "Ranking",
                Group.BEYOND_ACCURACY: "Beyond accuracy"}[self]


class Direction(StrEnum):
    """Which way is better."""

    HIGHER = "higher"
    LOWER = "lower"


GROUPS: tuple[Group, ...] = (Group.ONLINE, Group.RANKING, Group.BEYOND_ACCURACY)
"""The groups in display order (report sections, dashboard tables, glossary)."""


@dataclass(frozen=True)
class MetricInfo:
    """One metric: what it measures and how to read it.

    ``name`` is the metric as stored and parsed (``"ndcg"``; with ``takes_k`` it is written
    ``"ndcg@10"``). ``low``/``high`` bound its values (``None``: unbounded).
    """

    name: str
    kind: Kind
    group: Group
    direction: Direction
    low: float | None
    high: float | None
    takes_k: bool
    description: str
    formula: str
    reference: str
    zero_for_control: bool = False
    """True when control's value is 0 by definition (measured against control's own lists):
    a comparison with control is descriptive, never a verdict."""

    @property
    def higher_is_better(self) -> bool:
        return self.direction is Direction.HIGHER

    def label(self, k: int | None = None) -> str:
        """The result's name: ``"ndcg@10"``, or ``"song_clicks"`` for a metric without k."""
        return self.name if k is None or not self.takes_k else f"{self.name}@{k}"

    @property
    def range_text(self) -> str:
        """The value range as text, e.g. ``[0, 1]`` or ``[0, ∞)``."""
        low = "-∞" if self.low is None else f"{self.low:g}"
        high = "∞" if self.high is None else f"{self.high:g}"
        return f"{'(' if self.low is None else '['}{low}, {high}{')' if self.high is None else ']'}"


_U, _S = Kind.USER, Kind.SET
_ON, _RANK, _BEYOND = Group.ONLINE, Group.RANKING, Group.BEYOND_ACCURACY
_UP, _DOWN = Direction.HIGHER, Direction.LOWER
_RECSYS18 = ("Chen, Lamere, Schedl, Zamani, \"Recsys Challenge 2018: Automatic Music Playlist "
             "Continuation\", RecSys 2018; https://www.recsyschallenge.com/2018/")

# Append only (see "Order is storage" above).
_ENTRIES = (
    MetricInfo(
        "hit_rate", _U, _ON, _UP, 0, 1, True,
        "Share of served lists with at least one relevant item in the top k.",
        r"$\mathrm{hit\_rate@}k = 1$ if $|R_k \cap G| \ge 1$, else $0$",
        "He et al., \"Neural Collaborative Filtering\", WWW 2017 (hit ratio); RePlay HitRate"),
    MetricInfo(
        "precision", _U, _RANK, _UP, 0, 1, True,
        "Share of the top k that is relevant (divides by k even for shorter lists).",
        r"$\mathrm{precision@}k = |R_k \cap G| \,/\, k$",
        "Manning, Raghavan, Schütze, Introduction to Information Retrieval, 2008, ch. 8; "
        "trec_eval P_k"),
    MetricInfo(
        "recall", _U, _RANK, _UP, 0, 1, True,
        "Share of the relevant items found in the top k.",
        r"$\mathrm{recall@}k = |R_k \cap G| \,/\, |G|$",
        "Manning, Raghavan, Schütze, Introduction to Information Retrieval, 2008, ch. 8; "
        "trec_eval recall_k"),
    MetricInfo(
        "mrr", _U, _RANK, _UP, 0, 1, True,
        "Reciprocal rank of the first relevant item in the top k (0 if none).",
        r"$\mathrm{mrr@}k = 1 / \mathrm{rank}_1$, the rank of the first item of $G$ in "
        r"$R_k$ (ranks start at 1); $0$ if none",
        "Voorhees, \"The TREC-8 Question Answering Track Report\", TREC 1999; trec_eval "
        "recip_rank"),
    MetricInfo(
        "map", _U, _RANK, _UP, 0, 1, True,
        "Average precision at the ranks of the relevant items, normalised by min(k, |G|).",
        r"$\mathrm{AP@}k = \frac{1}{\min(k, |G|)} \sum_{i \le k} P@i \cdot \mathrm{rel}_i$, "
        r"$P@i = |R_i \cap G| / i$",
        "Kaggle apk (https://github.com/benhamner/Metrics); RePlay MAP"),
    MetricInfo(
        "ndcg", _U, _RANK, _UP, 0, 1, True,
        "Discounted gain of the top k against the ideal ordering of all relevant grades.",
        r"$\mathrm{ndcg@}k = \mathrm{DCG@}k / \mathrm{IDCG@}k$, "
        r"$\mathrm{DCG@}k = \sum_{i \le k} \mathrm{rel}_i / \log_2(i + 1)$ (linear gain)",
        "Järvelin & Kekäläinen, \"Cumulated gain-based evaluation of IR techniques\", "
        "ACM TOIS 20(4), 2002"),
    MetricInfo(
        "roc_auc", _U, _RANK, _UP, 0, 1, True,
        "Share of (relevant, non-relevant) pairs within the top k ranked in the right order.",
        r"$\mathrm{roc\_auc@}k = |\{(p, n) \in P \times N : \mathrm{rank}(p) < "
        r"\mathrm{rank}(n)\}| \,/\, (|P| \cdot |N|)$, $P$, $N$ the relevant and other items "
        r"of $R_k$",
        "Fawcett, \"An introduction to ROC analysis\", Pattern Recognition Letters 27, 2006; "
        "RePlay RocAuc"),
    MetricInfo(
        "surprisal", _U, _BEYOND, _UP, 0, 1, True,
        "How rarely the top k items were seen before: normalised self-information.",
        r"$\mathrm{surprisal@}k = \frac{1}{|R_k|} \sum_{j \in R_k} "
        r"\frac{-\log_2(u_j / N)}{\log_2 N}$, $u_j$ users of item $j$ in a reference "
        r"period (at least 1), $N$ users; in the rollup, every user's interactions in the "
        r"``TRACKER_ROLLUP_POPULARITY_DAYS`` days before the experiment's first day (fixed "
        r"at its start, as an offline evaluation's training log; the same for every day)",
        "Zhou et al., \"Solving the apparent diversity-accuracy dilemma of recommender "
        "systems\", PNAS 107(10), 2010; RePlay Surprisal"),
    MetricInfo(
        "unexpectedness", _U, _BEYOND, _UP, 0, 1, True,
        "Share of the top k that the baseline (control) list did not serve.",
        r"$\mathrm{unexpectedness@}k = 1 - |R_k \cap B_k| \,/\, k$, $B$ the baseline list",
        "Murakami, Mori, Orihara, \"Metrics for evaluating the serendipity of recommendation "
        "lists\", JSAI 2007; RePlay Unexpectedness", zero_for_control=True),
    MetricInfo(
        "r_precision", _U, _RANK, _UP, 0, 1, False,
        "Share of the first |G| served items that is relevant.",
        r"$\mathrm{r\_precision} = |R_{|G|} \cap G| \,/\, |G|$",
        _RECSYS18 + "; trec_eval Rprec"),
    MetricInfo(
        "song_clicks", _U, _ON, _DOWN, 0, 51, False,
        "Recommended-song clicks: page refreshes (10 items a page) before the first relevant "
        "item; lower is better.",
        r"$\mathrm{song\_clicks} = \lfloor (\mathrm{rank}_1 - 1) / 10 \rfloor$, "
        r"$\mathrm{rank}_1$ the rank of the first relevant item in the first 500; "
        r"$51$ if none",
        _RECSYS18),
    MetricInfo(
        "coverage", _S, _ON, _UP, 0, 1, True,
        "Share of the catalogue an arm showed in its top-k lists.",
        r"$\mathrm{coverage@}k = |\bigcup R_k \cap C| \,/\, |C|$, $C$ the catalogue",
        "Ge, Delgado-Battenfeld, Jannach, \"Beyond accuracy: evaluating recommender systems "
        "by coverage and serendipity\", RecSys 2010"),
    MetricInfo(
        "gini", _S, _BEYOND, _DOWN, 0, 1, True,
        "Inequality of item exposure in the top k across the catalogue; lower is fairer.",
        r"$\mathrm{gini@}k = \frac{\sum_{i=1}^{m} (2i - m - 1)\, x_i}{m \sum_i x_i}$, "
        r"exposures $x_1 \le \dots \le x_m$ over the catalogue",
        "Fleder & Hosanagar, \"Blockbuster culture's next rise or fall\", Management Science "
        "55(5), 2009; RecBole GiniIndex"),
    MetricInfo(
        "entropy", _S, _BEYOND, _UP, 0, None, True,
        "Shannon entropy (bits) of item exposure in the top k; higher is more diverse.",
        r"$H@k = -\sum_j p_j \log_2 p_j$, $p_j$ item $j$'s share of the exposure",
        "Shannon, \"A mathematical theory of communication\", 1948; RecBole ShannonEntropy"),
)

CATALOG: Mapping[str, MetricInfo] = MappingProxyType({m.name: m for m in _ENTRIES})
"""Every metric by name, in catalogue (storage) order."""


def info(name: str) -> MetricInfo:
    """The catalogue entry of ``name`` (``"ndcg"``, not ``"ndcg@10"``); a ValueError that lists
    the known names otherwise."""
    try:
        return CATALOG[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown metric {name!r}; known metrics: {known_names()}") from None


def known_names() -> str:
    """The catalogue's names, comma-separated in display order (for error messages)."""
    return ", ".join(display_order())


def names(*, kind: Kind | None = None, takes_k: bool | None = None) -> tuple[str, ...]:
    """Metric names in catalogue order, optionally only of one kind or (not) taking a k."""
    return tuple(m.name for m in CATALOG.values()
                 if (kind is None or m.kind is kind)
                 and (takes_k is None or m.takes_k is takes_k))


def in_group(group: Group) -> tuple[str, ...]:
    """The metric names of ``group``, in catalogue order."""
    return tuple(m.name for m in CATALOG.values() if m.group is group)


def display_order() -> tuple[str, ...]:
    """Every metric name grouped as :data:`GROUPS`, catalogue order within a group."""
    return tuple(name for group in GROUPS for name in in_group(group))


def lower_is_better() -> frozenset[str]:
    """Names of the metrics whose lower values are better (e.g. song_clicks, gini)."""
    return frozenset(m.name for m in CATALOG.values() if m.direction is Direction.LOWER)
