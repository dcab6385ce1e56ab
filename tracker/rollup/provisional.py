"""A provisional day kept encoded until it is final: only the users new interactions change
are scored again, from the stored state, without reading the day's impressions again.

A day whose attribution windows are still open is computed provisionally, and again each
time later interactions answer its impressions (the next day's clicks fall in its windows).
Nothing else of it changes then: not its served lists (new impressions make the plan read
the day whole again), not the experiment's popularity (a change makes it read every day
whole), only ground truths, which only grow (per impression and item the highest grade).
So when a day is computed while provisional, its scoring inputs are kept
(``rollup_provisional``, the ``provisional-*`` formats of :mod:`tracker.rollup.state`), one
row per part:

- part 0, ``provisional-users/1``: the day's users (the row number is the code), and the
  number of read chunks;
- part 1, ``provisional-items/2``: per item code its id and ln(users) in the popularity
  of the experiment (rewritten when a ground truth gains an item);
- per read chunk ``c``, part ``2 + 2c``, ``provisional-lists/2``: per impression its id,
  user, cell, serving time, served list as item codes and overlap with the baseline list,
  which nothing changes while the day is provisional: **written once**;
- and part ``3 + 2c``, ``provisional-truth/1``: per impression its ground truth as (item
  code, grade) lists, **rewritten only when that chunk's ground truth changed**;
- after the chunks' parts, ``provisional-gained/1``: the (impression, item) pairs a later
  run added or raised, when they are few (:data:`GAINED_SHARE` of the day's pairs: a tenth
  of the users answered touch every chunk, whose truth would all be written again); a
  reader merges them into the chunks' truth. Once they are many, or a run's own gain is,
  the truth of every chunk is written again and they are dropped.

In memory the codes are int32 (a day of 1M lists of 10 items: 40 MB of item codes rather
than 80). State in another layout (``provisional/1``, one stream of the whole day) is not
read: the day is then recomputed from the raw logs, which replaces it.

When new interactions answer the day (:mod:`tracker.rollup.plan`, ``Plan.rescore``), only
those interactions are read (by primary key), attributed to the stored impressions in numpy
(:func:`~tracker.rollup.columnar.answer_runs`, the same rule), and merged into the stored
ground truth; the impressions whose ground truth changed give the users to score again,
and every impression of those users is scored with the kernels a whole day uses
(:func:`~tracker.rollup.columnar.score_encoded`), chunk by chunk in the order the day was
read, so that each user's sums add in the same order as a full rollup's. Their unit rows
replace the stored ones; the cell statistics are computed again from the units. The truth
parts of the chunks that changed are written again. Once its windows close, the day is
final as it stands and the state dropped (:func:`tracker.rollup.day.finalize_day`), or, when
new interactions answer it then, scored from the state a last time without keeping it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.errors import StaleState
from tracker.rollup import queries, state
from tracker.rollup.aggregate import UnitTotals, totals_of_parts, unit_totals_of_codes
from tracker.rollup.chunk_parts import decode_chunks
from tracker.rollup.columnar import (
    EncodedLists,
    answer_runs,
    answered,
    grades_of,
    pairs_of,
    score_encoded,
)
from tracker.rollup.days import day_bounds
from tracker.rollup.outcomes import Layout
from tracker.rollup.pipeline import SCORERS
from tracker.rollup.popularity import Popularity
from tracker.rollup.truth import Truth, distinct_codes
from tracker.store.db import binary_rows
from tracker.store.rollup_tables import RollupProvisional

USERS_PART, ITEMS_PART, FIRST_CHUNK_PART = 0, 1, 2

GAINED_SHARE = 0.25
"""Up to this share of the day's ground-truth pairs, the pairs new interactions add or
raise are written as one more part (``provisional-gained/1``) instead of the truth of every
chunk they touch: a tenth of the users answered touch every chunk."""
MAX_GAINED_PARTS = 8  # past these, the truth of every chunk is written again


@dataclass(frozen=True)
class Answered:
    """A provisional day with new interactions merged into its ground truth, and the users
    (codes) whose impressions' ground truth changed."""

    day: ProvisionalDay
    changed_users: np.ndarray
    new_items: pa.Array  # ids of the ground-truth items added (for the catalog)


@dataclass(frozen=True)
class Parts:
    """``rollup_provisional`` rows to write: ``data`` by part number; ``whole``: they are
    the day's every part (any other is dropped), else they replace these parts only (and
    the parts from ``drop_from`` on are dropped)."""

    data: dict[int, memoryview]
    whole: bool
    drop_from: int | None = None  # the parts from this one on are dropped too


@dataclass(frozen=True)
class ProvisionalDay:
    """A provisional day's scoring inputs: every impression of the day (in the order they
    were scored, ``chunks`` numbering the read chunks), with user and item codes (int32)
    into ``users`` and ``items``; ``ln_users`` per item code plus a trailing 0 (padding).
    ``dirty``: the chunks whose ground truth changed since the state was read (None: a new
    state, every part to write); ``stored_items``: the items the stored state holds;
    ``gained``: the pairs :meth:`answer` added or raised since it was read;
    ``gained_parts``: the ``provisional-gained/1`` parts it holds."""

    chunks: np.ndarray
    lists: EncodedLists
    users: pa.Array
    items: pa.Array
    ln_users: np.ndarray
    n_users: int
    dirty: frozenset[int] | None = None
    stored_items: int = 0
    # the plan's attribution of the new interactions it read (``timed``) to the lists:
    # (list rows, interaction rows) of every pair, so that :meth:`answer` need not repeat it
    matched: tuple[np.ndarray, np.ndarray] | None = None
    gained: Truth | None = None
    gained_parts: int = 0

    @classmethod
    def of(cls, parts: list[EncodedLists], users: pa.Array, items: pa.Array,
           popularity: Popularity) -> ProvisionalDay:
        """The day from its chunks' inputs (in chunk order, best :func:`compact`) in the day's
        vocabularies ``users`` and ``items``, renumbered to the codes they use (in the same
        order, so ground truths stay sorted by item code). Lists whose ground truth was
        compacted (``unlisted``) are refused: later interactions could not merge into it."""
        if any(p.unlisted is not None for p in parts):
            raise ValueError("a provisional day keeps whole ground truths, not compacted ones")
        used_users, user_code = _dense(len(users), [p.users for p in parts])
        used_items, item_code = _dense(len(items), [a for p in parts
                                                    for a in (p.items, p.truth.items)])
        lists = _concat(parts)
        truth = Truth(lists.truth.rows, item_code[lists.truth.items], lists.truth.grades)
        lists = compact(replace(lists, users=user_code[lists.users],
                                items=item_code[lists.items], truth=truth))
        item_ids = items.take(pa.array(used_items, pa.int64()))
        chunks = np.repeat(np.arange(len(parts), dtype=np.int32), [p.size for p in parts])
        return cls(chunks, lists, users.take(pa.array(used_users, pa.int64())), item_ids,
                   popularity.ln_users(item_ids), popularity.n_users)

    @property
    def extent(self) -> queries.DayExtent:
        lists = self.lists
        if not lists.size:
            return queries.DayExtent(0, None, None, None, 0)
        return queries.DayExtent(lists.size, int(lists.ids.min()), int(lists.ids.max()),
                                 int(lists.served_at.max()), int(lists.lengths.max()))

    def impressions(self) -> pa.Table:
        """``id, user, served`` of the day's impressions (as
        :func:`~tracker.rollup.queries.day_impressions` reads them)."""
        lists = self.lists
        return pa.table({"id": pa.array(lists.ids, pa.int64()),
                         "user": self.users.take(pa.array(lists.users, pa.int32())),
                         "served": pa.array(lists.served_at, pa.int64())},
                        schema=queries.DAY_IMPRESSIONS)

    def answer(self, timed: pa.Table, keyed: pa.Table, relevance, window: int,
               limit: int) -> Answered | None:
        """Merge new interactions: ``timed`` (``user, item, event, at``, naming no
        impression) answer by time, ``keyed`` (``impression, item, event``) the impression
        they name. None when they answer the lists with more than ``limit`` pairs, or when
        the merged ground truth outgrows the day's served items by more than ``limit``
        rows (a heavy user's clicks, arriving run after run): the state then costs more
        than the day's lists, and the day is recomputed from the logs, where its ground
        truth is compacted (:func:`~tracker.rollup.truth.compact_truth`); it keeps no
        state after that."""
        lists = self.lists
        grades = grades_of(timed["event"], relevance)
        known = pc.is_in(timed["user"], value_set=self.users).to_numpy(
            zero_copy_only=False) & (grades > 0)
        matched = self.matched if self.matched is not None else \
            self.pairs(timed, window, limit)
        if matched is None:
            return None
        imp, it = matched
        graded = known[it]  # the pairs of the interactions that grade, renumbered among them
        imp, it = imp[graded], (np.cumsum(known) - 1)[it[graded]]
        keyed_grades = grades_of(keyed["event"], relevance)
        by_id = np.argsort(lists.ids)
        ids = keyed["impression"].to_numpy()
        at = np.minimum(np.searchsorted(lists.ids, ids, sorter=by_id), max(lists.size - 1, 0))
        named = (keyed_grades > 0) & (lists.size > 0)
        named &= lists.ids[by_id[at]] == ids if lists.size else named
        items, codes = _extend(self.items, [timed["item"].filter(pa.array(known)),
                                            keyed["item"]])
        new = Truth.highest(np.concatenate((imp, by_id[at][named])),
                            np.concatenate((codes[0][it], codes[1][named])),
                            np.concatenate((grades[known][it], keyed_grades[named])),
                            len(items))
        merged, gained = merge_truth(lists.truth, new, len(items))
        if merged.rows.size > lists.items.size + limit:
            return None
        rows = new.rows[gained]  # the pairs that changed: new ones, or a grade raised
        pairs = Truth(rows, new.items[gained].astype(np.int32), new.grades[gained])
        if self.gained is not None:
            pairs = merge_truth(self.gained, pairs, len(items))[0]
        ln_users = np.concatenate((self.ln_users[:-1], np.zeros(len(items) - len(self.items)
                                                                + 1)))
        day = replace(self, lists=replace(lists, truth=merged), items=items, ln_users=ln_users,
                      dirty=self._dirtied(rows), matched=None, gained=pairs)
        return Answered(day, distinct_codes(lists.users[rows], len(self.users)),
                        items.take(pa.array(distinct_codes(new.items[gained], len(items)))))

    def pairs(self, timed: pa.Table, window: int, limit: int
              ) -> tuple[np.ndarray, np.ndarray] | None:
        """The (list row, interaction row) pairs where an interaction of ``timed`` answers
        one of the day's impressions by time (users coded as the state codes them); None
        when there are more than ``limit`` (counted before any is made)."""
        known, users, at = self._timed(timed)
        # the day's users' interactions sorted once by (user, time), and the lists searched
        # among them: no sort the size of the day's lists (attribute sorts them twice)
        order = np.lexsort((at, users))
        lists_users = self.lists.users.astype(np.int64)
        runs = answer_runs(lists_users, self.lists.served_at, users[order], at[order], window)
        if runs is not None and int(runs.counts.sum()) > limit:
            return None
        rows, it = pairs_of(runs, lists_users, self.lists.served_at, users[order], at[order],
                            window)
        return rows, known[order[it]]

    def answered(self, timed: pa.Table, window: int) -> np.ndarray:
        """The list rows an interaction of ``timed`` answers by time (no pairs made)."""
        _, users, at = self._timed(timed)
        return np.flatnonzero(answered(self.lists.users.astype(np.int64),
                                       self.lists.served_at, users, at, window))

    def _timed(self, timed: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows of ``timed`` by the day's users, their user codes and times."""
        codes = pc.index_in(timed["user"], value_set=self.users)
        known = np.flatnonzero(codes.is_valid().to_numpy(zero_copy_only=False))
        users = pc.fill_null(codes, 0).to_numpy().astype(np.int64)[known]
        return known, users, timed["at"].to_numpy()[known]

    def _dirtied(self, rows: np.ndarray) -> frozenset[int] | None:
        """The chunks to write again once ``rows`` changed (None: all of them)."""
        if self.dirty is None:
            return None
        chunks = distinct_codes(self.chunks[rows], int(self.chunks.max(initial=-1)) + 1)
        return self.dirty | frozenset(chunks.tolist())

    def catalog(self) -> np.ndarray:
        """The day's catalog items (ids): served in a list or in a ground truth."""
        used = np.zeros(len(self.items), dtype=bool)
        used[self.lists.items] = True
        used[self.lists.truth.items] = True
        return np.asarray(self.items.filter(pa.array(used)).to_numpy(zero_copy_only=False),
                          dtype=object)

    def totals_of(self, users: np.ndarray, layout: Layout, cutoffs: list[int]) -> UnitTotals:
        """The unit totals of ``users`` (codes): every impression of theirs scored, chunk
        by chunk in the day's order (each user's sums add as in a whole day)."""
        marked = np.zeros(len(self.users), dtype=bool)
        marked[users] = True
        rows = np.flatnonzero(marked[self.lists.users])
        chunks = self.chunks[rows]
        starts = np.r_[0, np.cumsum(self.lists.lengths)[:-1]]

        def score(chunk: int):
            mine = _widened(_take(self.lists, rows[chunks == chunk], starts))
            values, defined = score_encoded(mine, self.ln_users, self.n_users, layout,
                                            cutoffs)
            return unit_totals_of_codes(mine.users, mine.cells, values, defined)

        # the chunks scored side by side as a whole day's are (the kernels release the
        # GIL), their parts merged in chunk order
        with ThreadPoolExecutor(max_workers=SCORERS) as pool:
            parts = list(pool.map(score, np.unique(chunks).tolist()))
        return totals_of_parts(parts, self.users, len(layout))

    def encode(self, cutoffs: list[int]) -> Parts:
        """The ``rollup_provisional`` parts to write: every part of a new state; else the
        pairs :meth:`answer` gained as one more part when they are few
        (:data:`GAINED_SHARE`), or the truth of the chunks that changed (of every chunk,
        the gained parts dropped, when the state holds some); and the items when they
        grew."""
        bounds = np.searchsorted(self.chunks, np.arange(int(self.chunks.max(initial=-1)) + 2))
        rows = np.searchsorted(self.lists.truth.rows, bounds)
        new = self.dirty is None
        gained = not new and self.gained is not None and \
            self.gained_parts < MAX_GAINED_PARTS and \
            self.gained.rows.size <= GAINED_SHARE * self.lists.truth.rows.size
        everything = not new and not gained and self.gained_parts > 0
        after = FIRST_CHUNK_PART + 2 * (bounds.size - 1)  # the first part after the chunks'
        data: dict[int, memoryview] = {}
        if new:
            data[USERS_PART] = state.write(pa.table({"user_id": self.users}),
                                           state.PROVISIONAL_USERS,
                                           chunks=str(bounds.size - 1))
        if new or len(self.items) > self.stored_items:
            data[ITEMS_PART] = state.write(pa.table({
                "item_id": self.items, "ln_users": pa.array(self.ln_users[:-1], pa.float64())}),
                state.PROVISIONAL_ITEMS, n_users=str(self.n_users))
        for chunk in range(bounds.size - 1):
            part = FIRST_CHUNK_PART + 2 * chunk
            if new:
                data[part] = _encode_lists(self.lists, bounds[chunk], bounds[chunk + 1],
                                           cutoffs)
            if new or everything or (not gained and chunk in self.dirty):
                data[part + 1] = _encode_truth(self.lists.truth, bounds[chunk],
                                               bounds[chunk + 1], rows[chunk], rows[chunk + 1])
        if gained and self.gained.rows.size:
            data[after + self.gained_parts] = state.write(pa.table({
                "row": pa.array(self.gained.rows, pa.int32()),
                "item": pa.array(self.gained.items, pa.int32()),
                "grade": pa.array(self.gained.grades, pa.float64())}),
                state.PROVISIONAL_GAINED, compress=True, lists=str(self.lists.size))
        return Parts(data, new, after if everything else None)

    @classmethod
    def decode(cls, parts: list[bytes], cutoffs: list[int]) -> ProvisionalDay:
        """The day of :meth:`encode`'s parts, in part order (columns read by name; a cutoff
        without its overlap column raises :class:`~tracker.errors.StaleState`)."""
        users = state.read(parts[USERS_PART], state.PROVISIONAL_USERS)
        state.require(users, ["user_id"], state.PROVISIONAL_USERS)
        items = state.read(parts[ITEMS_PART], state.PROVISIONAL_ITEMS)
        state.require(items, ["item_id", "ln_users"], state.PROVISIONAL_ITEMS)
        count = int(state.metadata(users, "chunks"))
        if len(parts) < FIRST_CHUNK_PART + 2 * count:
            raise StaleState(f"stored rollup state ({state.PROVISIONAL_USERS}) names "
                                   f"{count} chunks and holds {len(parts) - 2} parts of them; "
                                   "run `tracker rollup --full` to recompute the stored state")
        lists, sizes = decode_chunks([(parts[FIRST_CHUNK_PART + 2 * c],
                                       parts[FIRST_CHUNK_PART + 2 * c + 1])
                                      for c in range(count)], cutoffs)
        item_ids = items["item_id"].combine_chunks()
        gained = parts[FIRST_CHUNK_PART + 2 * count:]
        for data in gained:  # the highest grade per pair, whatever the parts' order
            truth = merge_truth(lists.truth, _decode_gained(data, lists.size, len(item_ids)),
                                len(item_ids))[0]
            lists = replace(lists, truth=truth)
        return cls(np.repeat(np.arange(count, dtype=np.int32), sizes),
                   lists, users["user_id"].combine_chunks(), item_ids,
                   np.r_[items["ln_users"].to_numpy(), 0.0],
                   int(state.metadata(items, "n_users")), frozenset(), len(item_ids),
                   gained_parts=len(gained))


def compact(lists: EncodedLists) -> EncodedLists:
    """``lists`` as a provisional day keeps them: int32 codes and lengths, the overlap as
    small integers (counts up to the largest cutoff)."""
    small = np.int8 if lists.overlap.max(initial=0) < 128 else np.int16
    return replace(lists, users=lists.users.astype(np.int32, copy=False),
                   items=lists.items.astype(np.int32, copy=False),
                   lengths=lists.lengths.astype(np.int32, copy=False),
                   overlap=lists.overlap.astype(small, copy=False),
                   truth=replace(lists.truth,
                                 items=lists.truth.items.astype(np.int32, copy=False)))


def _widened(lists: EncodedLists) -> EncodedLists:
    """``lists`` as a whole day's chunk scores them: int64 codes, float overlap."""
    return replace(lists, users=lists.users.astype(np.int64),
                   items=lists.items.astype(np.int64), lengths=lists.lengths.astype(np.int64),
                   overlap=lists.overlap.astype(np.float64),
                   truth=replace(lists.truth, items=lists.truth.items.astype(np.int64)))


def _encode_lists(lists: EncodedLists, low: int, high: int, cutoffs: list[int]) -> memoryview:
    """The ``provisional-lists/2`` part of the rows ``[low, high)``."""
    offsets = np.r_[0, np.cumsum(lists.lengths)]
    served = lists.items[offsets[low]:offsets[high]].astype(np.int32)
    data = {"id": pa.array(lists.ids[low:high], pa.int64()),
            "user": pa.array(lists.users[low:high], pa.int32()),
            "cell": pa.array(lists.cells[low:high], pa.int64()),
            "served_at": pa.array(lists.served_at[low:high], pa.int64()),
            "items": pa.ListArray.from_arrays(
                pa.array((offsets[low:high + 1] - offsets[low]).astype(np.int32)),
                pa.array(served, pa.int32())),
            "has_baseline": pa.array(lists.has_baseline[low:high], pa.bool_())}
    for j, k in enumerate(cutoffs):
        data[f"overlap@{k}"] = pa.array(lists.overlap[low:high, j])
    return state.write(pa.table(data), state.PROVISIONAL_LISTS, compress=True)


def _encode_truth(truth: Truth, low: int, high: int, first: int, last: int) -> memoryview:
    """The ``provisional-truth/1`` part of the rows ``[low, high)``, whose pairs are
    ``[first, last)`` of ``truth``."""
    offsets = np.searchsorted(truth.rows[first:last], np.arange(low, high + 1)).astype(np.int32)
    return state.write(pa.table({
        "truth_items": pa.ListArray.from_arrays(pa.array(offsets),
                                                pa.array(truth.items[first:last], pa.int32())),
        "truth_grades": pa.ListArray.from_arrays(pa.array(offsets),
                                                 pa.array(truth.grades[first:last],
                                                          pa.float64()))}),
        state.PROVISIONAL_TRUTH, compress=True)


def _decode_gained(data: bytes, lists: int, items: int) -> Truth:
    """The pairs of one ``provisional-gained/1`` part; one written for another state of
    the day (another number of lists, a row or item code the state lacks, pairs out of
    order) raises :class:`~tracker.errors.StaleState`."""
    table = state.read(data, state.PROVISIONAL_GAINED)
    state.require(table, ["row", "item", "grade"], state.PROVISIONAL_GAINED)
    rows, codes = table["row"].to_numpy().astype(np.int64), table["item"].to_numpy()
    keys = rows * max(items, 1) + codes
    if state.metadata(table, "lists") != str(lists) or (rows.size and (
            rows.min() < 0 or rows.max() >= lists or codes.min() < 0 or codes.max() >= items
            or (np.diff(keys) <= 0).any())):
        raise StaleState(f"stored rollup state ({state.PROVISIONAL_GAINED}) does not match "
                         "the day's lists and items; run `tracker rollup --full` to "
                         "recompute the stored state")
    return Truth(rows, codes.astype(np.int32), table["grade"].to_numpy().astype(np.float64))


def _dense(size: int, codes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The codes (below ``size``) used in ``codes``, sorted, and each code's new number
    (its rank among them): one pass, no sort."""
    used = np.zeros(size, dtype=bool)
    for part in codes:
        used[part] = True
    return np.flatnonzero(used), np.cumsum(used) - 1


def _concat(parts: list[EncodedLists]) -> EncodedLists:
    """The chunks' lists one after the other (ground-truth rows shifted to match)."""
    shift = np.r_[0, np.cumsum([p.size for p in parts])[:-1]].astype(np.int64)
    truth = Truth(np.concatenate([p.truth.rows + s for p, s in zip(parts, shift, strict=True)]),
                  np.concatenate([p.truth.items for p in parts]),
                  np.concatenate([p.truth.grades for p in parts]))
    return EncodedLists(*(np.concatenate([getattr(p, name) for p in parts])
                          for name in ("ids", "users", "cells", "served_at", "items", "lengths",
                                       "overlap", "has_baseline")), truth)


def _take(lists: EncodedLists, rows: np.ndarray, starts: np.ndarray) -> EncodedLists:
    """The lists of ``rows`` (ascending), their ground truth renumbered to match
    (``starts``: where each list's items start). Only the truth pairs between the first
    and the last of ``rows`` are looked at (a chunk's rows: its own pairs, not the whole
    day's)."""
    lengths = lists.lengths[rows]
    flat = np.repeat(starts[rows] - np.r_[0, np.cumsum(lengths)[:-1]], lengths) \
        + np.arange(int(lengths.sum()))
    low, high = (int(rows[0]), int(rows[-1]) + 1) if rows.size else (0, 0)
    first, last = np.searchsorted(lists.truth.rows, [low, high])
    local = np.full(high - low, -1, dtype=np.int64)
    local[rows - low] = np.arange(rows.size)
    mine = local[lists.truth.rows[first:last] - low]
    keep = mine >= 0
    truth = Truth(mine[keep], lists.truth.items[first:last][keep],
                  lists.truth.grades[first:last][keep])
    return EncodedLists(lists.ids[rows], lists.users[rows], lists.cells[rows],
                        lists.served_at[rows], lists.items[flat], lengths,
                        lists.overlap[rows], lists.has_baseline[rows], truth)


def _extend(dictionary: pa.Array, arrays: list[pa.Array | pa.ChunkedArray]
            ) -> tuple[pa.Array, list[np.ndarray]]:
    """``dictionary`` with the ids of ``arrays`` it lacks appended, and their codes."""
    values = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
    values = [v.cast(pa.string()) for v in values]
    distinct = pa.concat_arrays(values).unique() if values else pa.array([], pa.string())
    missing = pc.is_null(pc.index_in(distinct, value_set=dictionary))
    extended = pa.concat_arrays([dictionary, distinct.filter(missing)])
    return extended, [pc.index_in(v, value_set=extended).to_numpy(zero_copy_only=False)
                      .astype(np.int64) for v in values]


def merge_truth(old: Truth, new: Truth, n_items: int) -> tuple[Truth, np.ndarray]:
    """``old`` and ``new`` (each one pair per (row, item), sorted by it, item codes below
    ``n_items``) as one ground truth, per pair the highest grade (what :meth:`Truth.highest`
    of both gives; item codes int32); and per pair of ``new`` whether it changes ``old``: a
    pair ``old`` lacks, or a higher grade. The pairs of ``new`` are looked up in ``old``
    and the missing ones inserted where they sort: no sort of the merged pairs, and the
    changed pairs come out of the same lookup.

    >>> old = Truth(np.array([0, 2]), np.array([1, 0], np.int32), np.array([1.0, 1.0]))
    >>> new = Truth(np.array([0, 1, 2]), np.array([1, 0, 0]), np.array([1.0, 2.0, 3.0]))
    >>> merged, gained = merge_truth(old, new, 2)
    >>> merged.rows.tolist(), merged.items.tolist(), merged.grades.tolist(), gained.tolist()
    ([0, 1, 2], [1, 0, 0], [1.0, 2.0, 3.0], [False, True, True])
    """
    width = max(n_items, 1)
    before = old.rows.astype(np.int64) * width + old.items
    after = new.rows.astype(np.int64) * width + new.items
    at = np.searchsorted(before, after)
    found = at < before.size
    found[found] = before[at[found]] == after[found]
    grades = old.grades.copy()
    raised = found.copy()
    raised[found] = new.grades[found] > grades[at[found]]
    grades[at[raised]] = new.grades[raised]
    fresh = ~found
    # each new pair goes before the old pair it sorts before; ``at`` ascends (``new`` is
    # sorted), so its place in the merged pairs is ``at`` plus the new pairs before it (what
    # np.insert does, without its sort of the places for each of the three arrays)
    placed = at[fresh] + np.arange(int(fresh.sum()))
    kept = np.ones(before.size + placed.size, dtype=bool)
    kept[placed] = False

    def merge(old_values: np.ndarray, new_values: np.ndarray, dtype) -> np.ndarray:
        out = np.empty(kept.size, dtype=dtype)
        out[placed] = new_values[fresh]
        out[kept] = old_values
        return out

    merged = Truth(merge(old.rows, new.rows, np.int64), merge(old.items, new.items, np.int32),
                   merge(grades, new.grades, grades.dtype))
    return merged, fresh | raised


def load(conn: sa.Connection, experiment_id: int, day: date) -> list[bytes] | None:
    """The day's parts, in part order; None without a state, or with a state in another
    layout (``provisional/1``: the day is then recomputed from the raw logs)."""
    rows = binary_rows(conn, sa.select(RollupProvisional.part, RollupProvisional.data).where(
        RollupProvisional.experiment_id == experiment_id, RollupProvisional.day == day)
        .order_by(RollupProvisional.part))
    if not rows or rows[0][0] != USERS_PART or \
            state.format_of(rows[0][1]) != state.PROVISIONAL_USERS:
        return None
    return [bytes(data) for _, data in rows]


def save(conn: sa.Connection, experiment_id: int, day: date, parts: Parts | None) -> None:
    """Write ``parts`` (:meth:`ProvisionalDay.encode`; None: drop the day's state, it is
    final)."""
    if parts is None or parts.whole:
        drop(conn, experiment_id, day)
    elif parts.data or parts.drop_from is not None:
        replaced = RollupProvisional.part.in_(sorted(parts.data))
        if parts.drop_from is not None:
            replaced = sa.or_(replaced, RollupProvisional.part >= parts.drop_from)
        conn.execute(sa.delete(RollupProvisional).where(
            RollupProvisional.experiment_id == experiment_id, RollupProvisional.day == day,
            replaced))
    for part, data in sorted((parts.data if parts else {}).items()):
        conn.execute(sa.insert(RollupProvisional).values(
            experiment_id=experiment_id, day=day, part=part, data=data))


def drop(conn: sa.Connection, experiment_id: int, day: date | None = None) -> None:
    """Forget the state of ``day`` (None: of every day of the experiment)."""
    where = [RollupProvisional.experiment_id == experiment_id]
    if day is not None:
        where.append(RollupProvisional.day == day)
    conn.execute(sa.delete(RollupProvisional).where(*where))


def new_interactions(reader, info, day: date, after: int, through: int, window: int,
                     timed: pa.Table | None = None) -> tuple[pa.Table, pa.Table]:
    """The interactions with ids in ``(after, through]`` that may answer the day's
    impressions: by time (``timed`` when read already), and naming one."""
    start, end = day_bounds(day, info.timezone)
    if timed is None:
        timed = queries.new_window_interactions(reader, start, end, window, after, through)
    return timed, queries.new_keyed_interactions(reader, info.id, start, end, after, through)
