"""One chunk of a day, from the Arrow tables of :mod:`tracker.rollup.queries` to per-user
totals and item exposure, in vectorised numpy (no Python loop over impressions or items).

1. **Codes.** User ids and item ids (served lists, baselines, interactions) are
   dictionary-encoded by pyarrow into the codes of the day's vocabularies
   (:class:`~tracker.rollup.codes.Vocabulary`, shared by the day's chunks, so their results
   add up as integer arrays); everything after works on integer codes.
2. **Attribution** (the rule of docs/rollup.md): an interaction of user u at
   time t answers every impression of u served in ``[t - window, t]``. The day's
   interactions are sorted by (user, time) once; the interactions that answer one of the
   chunk's impressions are then a contiguous run, found by two binary searches
   (:func:`answer_runs`, :func:`pairs_of`; :func:`attribute` sorts the impressions instead, for one
   search per interaction); the runs are expanded into (impression, interaction) pairs.
   Interactions that name an impression answer that impression only (the SQL joins
   them). The ground truth keeps, per (impression, item), the highest grade, and only grades
   above 0. The runs' lengths are known before any pair is made (:class:`AnswerRuns`): past
   the caller's bound (one heavy user: lists x clicks pairs) the pairs are made in blocks
   of impressions, and each block's ground truth is compacted to what the metrics read
   (:func:`~tracker.rollup.truth.compact_truth`).
3. **Served position** of each ground-truth item: its first position in the list (0 when
   not served), by comparing codes row by row in bounded blocks.
4. The metrics then come from :mod:`tracker.rollup.outcomes` (``tracker.metrics`` itself),
   surprisal from Σ ln(item users) over the top k, unexpectedness from |R_k ∩ B_k| (a
   repeated item counts once, as ``tracker.metrics.unexpectedness`` does), and item
   exposure from counts of (cell, item) over the top k.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.metrics import ServedPositions
from tracker.metrics.batch import pad
from tracker.rollup.aggregate import CodedTotals, unit_totals_of_codes
from tracker.rollup.cells import Cells
from tracker.rollup.codes import Vocabulary, distinct
from tracker.rollup.outcomes import Layout, impression_values
from tracker.rollup.popularity import Popularity
from tracker.rollup.truth import (
    _PACKED_LIMIT,
    BLOCK_CELLS,
    GroundTruth,
    Truth,
    compact_truth,
    first_positions,
)

PAIR_LIMIT = 2_000_000
"""(impression, interaction) pairs a chunk makes at once when its caller sets no bound
(the rollup's days derive theirs from ``TRACKER_ROLLUP_CHUNK_CELLS``)."""


@dataclass(frozen=True)
class ChunkResult:
    """What one chunk adds to its day, in the day's codes (:class:`Vocabulary`)."""

    totals: CodedTotals
    exposures: dict[int, tuple[np.ndarray, np.ndarray]]  # cell -> (item codes, counts)
    catalog: np.ndarray  # item codes: served anywhere in a list or in a ground truth
    impressions: int
    truth_pairs: int
    users: np.ndarray  # per list, its user's code


@dataclass(frozen=True)
class Interactions:
    """Interactions that may answer a day's impressions by time, ready for attribution:
    users as codes of the day's user :class:`Vocabulary`, grades from the experiment's
    mapping (only those with a grade above 0 are kept), sorted by user and time (sorted
    once for the day: each chunk searches them, :func:`answer_runs`)."""

    users: np.ndarray  # int64 codes
    at: np.ndarray  # int64 microseconds
    grades: np.ndarray  # float64, > 0
    items: pa.Array  # string ids

    @classmethod
    def of(cls, table: pa.Table, relevance: Mapping[str, float] | None,
           users: Vocabulary) -> Interactions:
        grades = grades_of(table["event"], relevance)
        keep = grades > 0
        table = table.filter(pa.array(keep))
        (codes,) = users.encode([table["user"]])
        at = table["at"].to_numpy()
        order = np.lexsort((at, codes))  # by user, then time: what answer_runs needs
        items = table["item"].combine_chunks() if table.num_rows \
            else pa.array([], type=pa.string())
        return cls(codes[order], at[order], grades[keep][order], items.take(pa.array(order)))

    def of_users(self, present: np.ndarray) -> Interactions:
        """Those of the users whose codes are marked in the boolean array ``present``
        (codes past its end: not marked)."""
        known = self.users < present.size
        mine = np.zeros(self.users.size, dtype=bool)
        mine[known] = present[self.users[known]]
        index = np.flatnonzero(mine)
        return Interactions(self.users[index], self.at[index], self.grades[index],
                            self.items.take(pa.array(index)))


def _flat(lists: pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """The values of a list<string> column and each list's length (0 for null)."""
    combined = lists.combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(combined), 0).to_numpy().astype(np.int64)
    return pc.list_flatten(combined), lengths


def attribute(imp_user: np.ndarray, imp_served: np.ndarray, it_user: np.ndarray,
              it_at: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """All (impression, interaction) index pairs where the interaction is the same user's
    and occurred within ``[served, served + window]`` (both ends included).

    >>> imp, it = attribute(np.array([0, 0, 1]), np.array([10, 20, 10]),
    ...                     np.array([0, 1, 0]), np.array([20, 5, 30]), window=10)
    >>> sorted(zip(imp.tolist(), it.tolist()))
    [(0, 0), (1, 0), (1, 2)]
    """
    if imp_user.size == 0 or it_user.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    times, rank = np.unique(imp_served, return_inverse=True)
    span = times.size + 1
    key = imp_user * span + rank
    order = np.argsort(key)
    key = key[order]
    low_key = it_user * span + np.searchsorted(times, it_at - window, side="left")
    high_key = it_user * span + np.searchsorted(times, it_at, side="right")
    it_order = np.argsort(low_key)  # sorted needles: the searches walk memory in order
    low = np.searchsorted(key, low_key[it_order], side="left")  # first served >= t - w
    high = np.searchsorted(key, high_key[it_order], side="left")  # past the last <= t
    counts = np.maximum(high - low, 0)
    total = int(counts.sum())
    it_index = np.repeat(it_order, counts)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return order[np.repeat(low, counts) + offsets], it_index


def pairs_of(runs: AnswerRuns | None, imp_user: np.ndarray, imp_served: np.ndarray,
             it_user: np.ndarray, it_at: np.ndarray, window: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`attribute`'s pairs of interactions sorted by user, then time
    (:class:`Interactions`), expanded from their :func:`answer_runs` (``runs``, found already:
    callers count them first to bound what they make): the impressions were searched among
    the interactions, so nothing the size of the interactions is sorted again, as
    :func:`attribute` would for every chunk. ``runs`` None (keys that would not fit in an
    int64, a negative window, interactions out of order): :func:`attribute` itself."""
    if runs is None:
        return attribute(imp_user, imp_served, it_user, it_at, window)
    return runs.pairs(0, runs.low.size)


@dataclass(frozen=True)
class AnswerRuns:
    """Per impression, the run ``[low, high)`` of the (sorted) interactions that answer it
    by time: what :func:`pairs_of` expands into pairs. Known before any pair is
    made, so a caller can bound how many it makes at once (:meth:`blocks`) or only count
    them (one user's 100,000 lists answered by 20,000 clicks each are 2e9 pairs)."""

    low: np.ndarray
    high: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        return self.high - self.low

    def pairs(self, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
        """The (impression, interaction) pairs of the impressions ``[first, last)``."""
        low, counts = self.low[first:last], self.counts[first:last]
        total = int(counts.sum())
        offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        return np.repeat(np.arange(first, last), counts), np.repeat(low, counts) + offsets

    def blocks(self, limit: int) -> list[tuple[int, int]]:
        """Consecutive ranges of impressions, each answered by at most ``limit`` pairs (an
        impression answered by more alone in its range: its pairs are at most the
        interactions, which are held already)."""
        ends = np.cumsum(self.counts)
        bounds, first = [], 0
        while first < ends.size:
            before = int(ends[first - 1]) if first else 0
            last = max(int(np.searchsorted(ends, before + limit, side="right")), first + 1)
            bounds.append((first, last))
            first = last
        return bounds


def answer_runs(imp_user: np.ndarray, imp_served: np.ndarray, it_user: np.ndarray,
                it_at: np.ndarray, window: int) -> AnswerRuns | None:
    """The :class:`AnswerRuns` of the impressions among interactions sorted by user, then
    time; None where :func:`pairs_of` takes :func:`attribute` (keys that would not
    fit, a negative window, interactions out of order)."""
    if imp_user.size == 0 or it_user.size == 0:
        empty = np.zeros(imp_user.size, dtype=np.int64)
        return AnswerRuns(empty, empty)
    base = min(int(imp_served.min()), int(it_at.min()))
    span = max(int(it_at.max()), int(imp_served.max()) + window) - base + 1
    if window < 0 or \
            (max(int(imp_user.max()), int(it_user.max())) + 1) * span >= _PACKED_LIMIT:
        return None
    key = it_user.astype(np.int64) * span + (it_at - base)  # ascending: sorted by user, time
    if key.size > 1 and not (key[1:] >= key[:-1]).all():
        return None
    start = imp_user.astype(np.int64) * span + (imp_served - base)
    low = np.searchsorted(key, start, side="left")  # the first at >= served
    high = np.searchsorted(key, start + window, side="right")  # past the last <= served + w
    return AnswerRuns(low, high)


def answered(imp_user: np.ndarray, imp_served: np.ndarray, it_user: np.ndarray,
             it_at: np.ndarray, window: int) -> np.ndarray:
    """Whether each impression is answered by time by one of the interactions (any
    order): :func:`attribute`'s rule without making its pairs (the plan needs only
    which impressions new interactions answer)."""
    if imp_user.size == 0 or it_user.size == 0:
        return np.zeros(imp_user.size, dtype=bool)
    order = np.lexsort((it_at, it_user))
    runs = answer_runs(imp_user, imp_served, it_user[order], it_at[order], window)
    if runs is not None:
        return runs.counts > 0
    # keys too wide to pack: the impressions sorted instead (as :func:`attribute`), and
    # each interaction's run of them marked in a difference array
    times, rank = np.unique(imp_served, return_inverse=True)
    span = times.size + 1
    key = imp_user * span + rank
    by_key = np.argsort(key)
    key = key[by_key]
    low = np.searchsorted(key, it_user * span + np.searchsorted(times, it_at - window,
                                                                 side="left"), side="left")
    high = np.searchsorted(key, it_user * span + np.searchsorted(times, it_at, side="right"),
                           side="left")
    marks = np.zeros(key.size + 1, dtype=np.int64)
    np.add.at(marks, low, 1)
    np.add.at(marks, np.maximum(high, low), -1)
    out = np.zeros(imp_user.size, dtype=bool)
    out[by_key] = np.cumsum(marks[:-1]) > 0
    return out


def _overlaps(top: np.ndarray, baseline: np.ndarray, cutoffs: Sequence[int]) -> np.ndarray:
    """Per list and cutoff k, |R_k ∩ B_k| as sets (an item repeated in R_k counts once)."""
    n, width = top.shape
    out = np.zeros((n, len(cutoffs)))
    if baseline.shape[1] == 0:
        return out
    step = max(1, BLOCK_CELLS // max(width * max(width, baseline.shape[1]), 1))
    upper = np.tril(np.ones((width, width), dtype=bool), -1)  # j < i
    for at in range(0, n, step):
        a = top[at:at + step]
        b = baseline[at:at + step]
        # the first baseline position of each served item: the positions from the last
        # to the first, each overwriting (a pass per position, no 3-d comparison)
        first_in_b = np.full(a.shape, np.iinfo(np.int64).max)
        for j in range(b.shape[1] - 1, -1, -1):
            first_in_b[a == b[:, j:j + 1]] = j
        counted = a >= 0
        ordered = np.sort(a, axis=1)
        if np.any((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)):
            # a list serves an item twice (the SDK refuses it; rows may predate that)
            counted &= ~((a[:, :, None] == a[:, None, :]) & upper[None]).any(axis=2)
        for j, k in enumerate(cutoffs):
            out[at:at + step, j] = (counted[:, :k] & (first_in_b[:, :k] < k)).sum(axis=1)
    return out


def grades_of(events: pa.Array, relevance: Mapping[str, float] | None) -> np.ndarray:
    """Each event's grade: the experiment's mapping (unknown events 0), or 1 without one."""
    if relevance is None:
        return np.ones(len(events))
    encoded = pc.dictionary_encode(events)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    names = encoded.dictionary.to_pylist()
    table = np.array([float(relevance.get(name, 0.0)) for name in names] + [0.0])
    index = pc.fill_null(encoded.indices, len(names)).to_numpy().astype(np.int64)
    return table[index]


def _ground_truth(lists: pa.Table, imp_user: np.ndarray, interactions: Interactions,
                  it_items: np.ndarray, keyed: pa.Table, keyed_items: np.ndarray,
                  relevance: Mapping[str, float] | None, window: int, n_items: int,
                  served: np.ndarray, keep: int, limit: int) -> GroundTruth:
    """Time-window pairs (:func:`pairs_of`), plus the interactions that name an
    impression; per (impression, item) the highest grade, compacted
    (:func:`~tracker.rollup.truth.compact_truth`, ``keep`` unserved items per list).

    Pairs beyond ``limit`` (counted before any is made: :class:`AnswerRuns`) are made for
    consecutive impressions at most ``limit`` at a time (:meth:`AnswerRuns.blocks`), each
    block reduced to its (impression, item) rows and compacted before the next is made:
    one heavy user's day (100,000 lists, 20,000 clicks in their windows) no longer holds
    lists x clicks pairs, nor lists x clicked items rows. Blocks are ranges of
    impressions, so their rows come out as one :meth:`Truth.highest` of every pair would
    give them, less what compaction leaves out. Within the bound nothing is compacted: a
    day without heavy users is scored as it always was, and may keep its state."""
    at = lists["served"].to_numpy()
    keyed_rows, keyed_item, keyed_grade = _named(lists, keyed, keyed_items, relevance)

    def highest(imp_index, it_index, rows, items, grades, levels=None) -> Truth:
        """The pairs' and the named rows' (list, item) rows with their highest grade (the
        pairs' arrays used as they are when nothing is named: no copy)."""
        pair_items, pair_grades = it_items[it_index], interactions.grades[it_index]
        if rows.size:
            imp_index = np.concatenate((imp_index, rows))
            pair_items = np.concatenate((pair_items, items))
            pair_grades = np.concatenate((pair_grades, grades))
        return Truth.highest(imp_index, pair_items, pair_grades, n_items, levels)

    runs = answer_runs(imp_user, at, interactions.users, interactions.at, window)
    if runs is None or int(runs.counts.sum()) <= limit:  # within the bound: kept whole
        pairs = pairs_of(runs, imp_user, at, interactions.users, interactions.at, window)
        truth = highest(*pairs, keyed_rows, keyed_item, keyed_grade)
        return GroundTruth(truth, None, np.empty(0, dtype=np.int64), int(truth.rows.size))
    by_row = np.argsort(keyed_rows, kind="stable")
    keyed_rows, keyed_item, keyed_grade = (a[by_row] for a in
                                           (keyed_rows, keyed_item, keyed_grade))
    levels = np.unique(np.concatenate((interactions.grades, keyed_grade)))
    parts: list[Truth] = []
    unlisted: np.ndarray | None = None
    dropped = np.zeros(n_items, dtype=bool)
    pairs = 0
    for first, last in runs.blocks(limit):
        part = compact_truth(highest(*runs.pairs(first, last), *(
            a[slice(*np.searchsorted(keyed_rows, [first, last]))]
            for a in (keyed_rows, keyed_item, keyed_grade)), levels), served, keep,
            n_items)
        parts.append(part.truth)
        pairs += part.pairs
        if part.unlisted is not None:  # folded as they come: at most the chunk's items
            unlisted = part.unlisted if unlisted is None else unlisted + part.unlisted
            dropped[part.dropped_items] = True
    return GroundTruth(Truth(*(np.concatenate([getattr(p, name) for p in parts])
                               for name in ("rows", "items", "grades"))),
                       unlisted, np.flatnonzero(dropped), pairs)


def _named(lists: pa.Table, keyed: pa.Table, keyed_items: np.ndarray,
           relevance: Mapping[str, float] | None) -> tuple[np.ndarray, np.ndarray,
                                                           np.ndarray]:
    """The interactions naming one of ``lists`` (``keyed``, their items coded
    ``keyed_items``) with a grade above 0: each one's list (row), item and grade."""
    if not keyed.num_rows:
        return (np.empty(0, dtype=np.int64), np.empty(0, dtype=keyed_items.dtype),
                np.empty(0))
    ids = lists["id"].to_numpy()
    by_id = np.argsort(ids)
    grades = grades_of(keyed["event"], relevance)
    named = grades > 0
    rows = by_id[np.searchsorted(ids, keyed["impression"].to_numpy()[named], sorter=by_id)]
    return rows, keyed_items[named], grades[named]


@dataclass(frozen=True)
class EncodedLists:
    """A chunk's scoring inputs in the day's codes, nothing left to read or hash.
    ``truth.rows`` index these lists."""

    ids: np.ndarray  # impression ids
    users: np.ndarray  # user codes
    cells: np.ndarray
    served_at: np.ndarray  # microseconds
    items: np.ndarray  # the served item codes, list after list (``lengths`` each)
    lengths: np.ndarray
    overlap: np.ndarray  # (lists, cutoffs): |R_k ∩ B_k|, which no ground truth changes
    has_baseline: np.ndarray
    truth: Truth
    # per list, relevant items compacted out of ``truth`` (truth.compact_truth); None:
    # none was compacted
    unlisted: np.ndarray | None = None

    @property
    def size(self) -> int:
        return self.ids.size


def score_encoded(lists: EncodedLists, ln_users: np.ndarray, n_users: int, layout: Layout,
                  cutoffs: Sequence[int], served: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per list and layout column: the value and whether it is defined
    (:func:`~tracker.rollup.outcomes.impression_values`). ``ln_users``: ln(users) per item
    code, plus a trailing 0 (padding); ``served``: the lists padded (computed when None)."""
    if served is None:
        served = np.ascontiguousarray(pad(lists.items, lists.lengths, min_width=1))
    truth = lists.truth
    positions = ServedPositions(lists.lengths, truth.rows,
                                first_positions(served, truth.rows, truth.items), truth.grades,
                                unlisted=lists.unlisted)
    # surprisal: Σ ln(users of the item) over the top k (never-seen items count 1 user)
    served_top = served[:, :max(cutoffs)]
    partial = np.cumsum(ln_users[served_top], axis=1)  # padding (-1) reads the trailing 0
    ln_sums = np.stack([partial[:, min(k, served_top.shape[1]) - 1] for k in cutoffs], axis=1) \
        if lists.size else np.zeros((0, len(cutoffs)))
    return impression_values(positions, layout, cutoffs, n_users, ln_sums, lists.overlap,
                             lists.has_baseline)


def score_chunk(lists: pa.Table, interactions: Interactions, keyed: pa.Table,
                popularity: Popularity, relevance: Mapping[str, float] | None, window: int,
                cutoffs: Sequence[int], layout: Layout, items: Vocabulary,
                users: Vocabulary, pair_limit: int = PAIR_LIMIT) -> ChunkResult:
    """Per-user totals, item exposure per cell and the catalog items of one chunk.

    ``interactions`` may hold other users' too (a whole day's, read once): only the chunk's
    users' are used. ``keyed``: the interactions naming one of the chunk's impressions.
    User and item ids are coded in the day's vocabularies ``users`` and ``items``.
    ``pair_limit``: the (impression, interaction) pairs made at once (:func:`_ground_truth`)."""
    cutoffs = list(cutoffs)
    top = max(cutoffs)
    (imp_user,) = users.encode([lists["user"]])
    present = np.zeros(len(users), dtype=bool)
    present[imp_user] = True
    interactions = interactions.of_users(present)
    item_values, lengths = _flat(lists["items"])
    base_values, base_lengths = _flat(lists["baseline"])
    item_codes, base_codes, it_items, keyed_items = items.encode(
        [item_values, base_values, interactions.items, keyed["item"]])
    served = np.ascontiguousarray(pad(item_codes, lengths, min_width=1))
    baseline = np.ascontiguousarray(pad(base_codes, base_lengths, top, fill=-2, min_width=1))
    ground = _ground_truth(lists, imp_user, interactions, it_items, keyed, keyed_items,
                           relevance, window, len(items), served, top, pair_limit)
    truth = ground.truth
    placed = Cells.matrix(lists)  # a column per cell a list falls in: its arm, its slices
    encoded = EncodedLists(lists["id"].to_numpy(), imp_user, placed[:, 0],
                           lists["served"].to_numpy(),
                           item_codes, lengths, _overlaps(served[:, :top], baseline, cutoffs),
                           lists["baseline"].is_valid().to_numpy(zero_copy_only=False), truth,
                           ground.unlisted)
    values, defined = score_encoded(encoded, popularity.ln_users(items.ids),
                                    popularity.n_users, layout, cutoffs, served)
    catalog = distinct(np.concatenate((item_codes, truth.items) + (
        (ground.dropped_items,) if ground.dropped_items.size else ())))
    copies = placed.shape[1]  # each list's values go to each of its cells
    cells = placed.T.ravel()
    return ChunkResult(unit_totals_of_codes(np.tile(imp_user, copies), cells,
                                            _repeated(values, copies),
                                            _repeated(defined, copies)),
                       exposures(_repeated(served, copies), cells, cutoffs), catalog,
                       lists.num_rows, ground.pairs, imp_user)


def _repeated(rows: np.ndarray, times: int) -> np.ndarray:
    """``rows`` stacked ``times`` times (itself once)."""
    return rows if times == 1 else np.concatenate([rows] * times)


def exposures(items: np.ndarray, cells: np.ndarray,
              cutoffs: Sequence[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per cell: the codes of its served items and, per cutoff, the number of lists holding
    each in their top k (items served only further down included, with 0)."""
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    if items.size == 0:
        return out
    cell_codes, cell_index = np.unique(cells, return_inverse=True)
    size = int(items.max()) + 1
    slots = items >= 0
    # a slot's band: how many cutoffs its rank reaches past (0: inside every top k)
    limits = np.asarray(cutoffs)
    band = (np.arange(items.shape[1])[:, None] >= limits[None, :]).sum(axis=1)
    bands = limits.size + 1
    key = ((cell_index[:, None] * size + items) * bands + band[None, :])[slots]
    if cell_codes.size * size * bands > DENSE_EXPOSURE_KEYS:  # slices: few items each
        return _sparse_exposures(key, cell_codes, size, bands)
    # dense (cell, item, band) keys, one count: no sort, one pass over the slots
    by_band = np.bincount(key, minlength=cell_codes.size * size * bands).reshape(
        cell_codes.size, size, bands)
    present = by_band.sum(axis=2)
    counts = np.cumsum(by_band, axis=2)[:, :, :limits.size]  # within top k: bands < j
    for a, cell in enumerate(cell_codes):
        codes = np.flatnonzero(present[a])
        out[int(cell)] = (codes, counts[a, codes])
    return out


DENSE_EXPOSURE_KEYS = 1 << 22
"""The most (cell, item, band) keys :func:`exposures` counts in one dense array (32 MiB);
beyond (many cells: slices), it counts the keys present only."""


def _sparse_exposures(key: np.ndarray, cell_codes: np.ndarray, size: int, bands: int
                      ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """:func:`exposures` from the (cell, item, band) keys present, sorted once."""
    found, n = np.unique(key, return_counts=True)
    pairs, pair = np.unique(found // bands, return_inverse=True)  # (cell, item), sorted
    by_band = np.zeros((pairs.size, bands), dtype=np.int64)
    by_band[pair, found % bands] = n
    counts = np.cumsum(by_band, axis=1)[:, :bands - 1]
    cell_of, item_of = pairs // size, pairs % size
    starts = np.searchsorted(cell_of, np.arange(cell_codes.size + 1))
    return {int(cell): (item_of[starts[a]:starts[a + 1]], counts[starts[a]:starts[a + 1]])
            for a, cell in enumerate(cell_codes)}
