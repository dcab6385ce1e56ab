"""A provisional day kept encoded until it is final: only the users new interactions change
are scored again, from the stored state, without reading the day's impressions again.

A day whose attribution windows are still open is computed provisionally, and again each
time later interactions answer its impressions (the next day's clicks fall in its windows).
Nothing else of it changes then: not its served lists (new impressions make the plan read
the day whole again), not the popularity before it (likewise), only ground truths, which
only grow (per impression and item the highest grade). So when a day is computed while
provisional, its scoring inputs are kept (``rollup_provisional``, formats ``provisional/1``
and ``provisional-items/1`` of :mod:`tracker.rollup.state`): per impression its id, user,
arm, serving time, served list as item codes, its overlap with the baseline list, and its
ground truth as (item code, grade) pairs; per item code its id and ln(users) in the
popularity before the day.

When new interactions answer the day (:mod:`tracker.rollup.plan`, ``Plan.rescore``), only
those interactions are read (by primary key), attributed to the stored impressions in numpy
(:func:`~tracker.rollup.columnar.attribute`, the same rule), and merged into the stored
ground truth; the impressions whose ground truth changed give the users to score again,
and every impression of those users is scored with the kernels a whole day uses
(:func:`~tracker.rollup.columnar.score_encoded`), chunk by chunk in the order the day was
read, so that each user's sums add in the same order as a full rollup's. Their unit rows
replace the stored ones; the arm statistics are computed again from the units. The state is
written again with the merged ground truth, and dropped when the day is computed final (its
windows closed: the plan then reads it whole from the raw logs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.rollup import queries, state
from tracker.rollup.aggregate import UnitTotals, totals_of_parts, unit_totals_of_codes
from tracker.rollup.columnar import EncodedLists, Truth, attribute, grades_of, score_encoded
from tracker.rollup.days import day_bounds
from tracker.rollup.outcomes import Layout
from tracker.rollup.popularity import Popularity
from tracker.store.rollup_tables import RollupProvisional


@dataclass(frozen=True)
class Answered:
    """A provisional day with new interactions merged into its ground truth, and the users
    (codes) whose impressions' ground truth changed."""

    day: ProvisionalDay
    changed_users: np.ndarray
    new_items: pa.Array  # ids of the ground-truth items added (for the catalog)


@dataclass(frozen=True)
class ProvisionalDay:
    """A provisional day's scoring inputs: every impression of the day (in the order they
    were scored, ``chunks`` numbering the read chunks), with user and item codes into
    ``users`` and ``items``; ``ln_users`` per item code plus a trailing 0 (padding)."""

    chunks: np.ndarray
    lists: EncodedLists
    users: pa.Array
    items: pa.Array
    ln_users: np.ndarray
    n_users: int

    @classmethod
    def of(cls, parts: list[EncodedLists], users: pa.Array, items: pa.Array,
           popularity: Popularity) -> ProvisionalDay:
        """The day from its chunks' inputs (in chunk order) in the day's vocabularies
        ``users`` and ``items``, renumbered to the codes they use (in the same order, so
        ground truths stay sorted by item code)."""
        lists = _concat(parts)
        used_users, user_code = _dense(len(users), [lists.users])
        used_items, item_code = _dense(len(items), [lists.items, lists.truth.items])
        truth = Truth(lists.truth.rows, item_code[lists.truth.items], lists.truth.grades)
        lists = replace(lists, users=user_code[lists.users], items=item_code[lists.items],
                        truth=truth)
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
                         "user": self.users.take(pa.array(lists.users, pa.int64())),
                         "served": pa.array(lists.served_at, pa.int64())},
                        schema=queries.DAY_IMPRESSIONS)

    def answer(self, timed: pa.Table, keyed: pa.Table, relevance, window: int) -> Answered:
        """Merge new interactions: ``timed`` (``user, item, event, at``, naming no
        impression) answer by time, ``keyed`` (``impression, item, event``) the impression
        they name."""
        lists = self.lists
        grades = grades_of(timed["event"], relevance)
        users = pc.index_in(timed["user"], value_set=self.users)
        known = users.is_valid().to_numpy(zero_copy_only=False) & (grades > 0)
        it_users = pc.fill_null(users, 0).to_numpy()[known].astype(np.int64)
        imp, it = attribute(lists.users, lists.served_at, it_users,
                            timed["at"].to_numpy()[known], window)
        keyed_grades = grades_of(keyed["event"], relevance)
        by_id = np.argsort(lists.ids)
        ids = keyed["impression"].to_numpy()
        at = np.minimum(np.searchsorted(lists.ids, ids, sorter=by_id), max(lists.size - 1, 0))
        named = (keyed_grades > 0) & (lists.size > 0)
        named &= lists.ids[by_id[at]] == ids if lists.size else named
        items, codes = _extend(self.items, [timed["item"].filter(pa.array(known)),
                                            keyed["item"]])
        old = lists.truth
        merged = Truth.highest(
            np.concatenate((old.rows, imp, by_id[at][named])),
            np.concatenate((old.items, codes[0][it], codes[1][named])),
            np.concatenate((old.grades, grades[known][it], keyed_grades[named])), len(items))
        changed = _changed(old, merged, len(items))
        ln_users = np.concatenate((self.ln_users[:-1], np.zeros(len(items) - len(self.items)
                                                                + 1)))
        day = replace(self, lists=replace(lists, truth=merged), items=items, ln_users=ln_users)
        return Answered(day, np.unique(lists.users[merged.rows[changed]]),
                        items.take(pa.array(np.unique(merged.items[changed]), pa.int64())))

    def rebuilt(self, timed: pa.Table, keyed: pa.Table, relevance, window: int) -> Answered:
        """The ground truth built again from ``timed`` and ``keyed`` (as :meth:`answer`
        takes them: here every interaction of the day's windows), not merged into the
        stored one; the users whose ground truth differs from the stored one in any
        (impression, item) pair or grade (:mod:`tracker.rollup.final`)."""
        empty = Truth(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0))
        fresh = replace(self, lists=replace(self.lists, truth=empty)).answer(
            timed, keyed, relevance, window).day
        old, new = self.lists.truth, fresh.lists.truth
        gained = _changed(old, new, len(fresh.items))
        rows = np.concatenate((new.rows[gained], old.rows[_changed(new, old, len(fresh.items))]))
        return Answered(fresh, np.unique(self.lists.users[rows]),
                        fresh.items.take(pa.array(np.unique(new.items[gained]), pa.int64())))

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
        parts = []
        for chunk in np.unique(self.chunks[rows]):
            mine = _take(self.lists, rows[self.chunks[rows] == chunk])
            values, defined = score_encoded(mine, self.ln_users, self.n_users, layout,
                                            cutoffs)
            parts.append(unit_totals_of_codes(mine.users, mine.arms, values, defined))
        return totals_of_parts(parts, self.users, len(layout))

    def encode(self, cutoffs: list[int]) -> list[memoryview]:
        """The two ``rollup_provisional`` parts: the impressions, the items."""
        lists = self.lists
        offsets = np.r_[0, np.cumsum(lists.lengths)].astype(np.int32)
        truth_offsets = np.searchsorted(lists.truth.rows, np.arange(lists.size + 1))
        data = {"chunk": pa.array(self.chunks, pa.int32()),
                "id": pa.array(lists.ids, pa.int64()),
                "arm_id": pa.array(lists.arms, pa.int64()),
                "served_at": pa.array(lists.served_at, pa.int64()),
                "user_id": pa.DictionaryArray.from_arrays(
                    pa.array(lists.users, pa.int32()), self.users),
                "items": pa.ListArray.from_arrays(pa.array(offsets),
                                                  pa.array(lists.items, pa.int32())),
                "has_baseline": pa.array(lists.has_baseline, pa.bool_()),
                "truth_items": pa.ListArray.from_arrays(
                    pa.array(truth_offsets.astype(np.int32)),
                    pa.array(lists.truth.items, pa.int32())),
                "truth_grades": pa.ListArray.from_arrays(
                    pa.array(truth_offsets.astype(np.int32)),
                    pa.array(lists.truth.grades, pa.float64()))}
        for j, k in enumerate(cutoffs):
            data[f"overlap@{k}"] = pa.array(lists.overlap[:, j].astype(np.int8), pa.int8())
        items = pa.table({"item_id": self.items,
                          "ln_users": pa.array(self.ln_users[:-1], pa.float64())})
        return [state.write(pa.table(data), state.PROVISIONAL, n_users=str(self.n_users)),
                state.write(items, state.PROVISIONAL_ITEMS)]

    @classmethod
    def decode(cls, parts: list[bytes], cutoffs: list[int]) -> ProvisionalDay:
        """The day of :meth:`encode`'s parts (columns read by name; a cutoff without its
        overlap column raises :class:`~tracker.errors.StaleState`)."""
        table = state.read(parts[0], state.PROVISIONAL)
        overlaps = [f"overlap@{k}" for k in cutoffs]
        state.require(table, ["chunk", "id", "arm_id", "served_at", "user_id", "items",
                              "has_baseline", "truth_items", "truth_grades", *overlaps],
                      state.PROVISIONAL)
        items = state.read(parts[1], state.PROVISIONAL_ITEMS)
        state.require(items, ["item_id", "ln_users"], state.PROVISIONAL_ITEMS)
        user = table["user_id"].combine_chunks()
        truth_items = table["truth_items"].combine_chunks()
        served = table["items"].combine_chunks()
        n = table.num_rows
        truth = Truth(np.repeat(np.arange(n), _lengths(truth_items)),
                      _values(truth_items, np.int64),
                      _values(table["truth_grades"].combine_chunks(), np.float64))
        overlap = np.stack([table[name].to_numpy().astype(np.float64) for name in overlaps],
                           axis=1) if n else np.zeros((0, len(cutoffs)))
        lists = EncodedLists(
            table["id"].to_numpy(), user.indices.to_numpy().astype(np.int64),
            table["arm_id"].to_numpy(), table["served_at"].to_numpy(),
            _values(served, np.int64), _lengths(served), overlap,
            table["has_baseline"].to_numpy(zero_copy_only=False), truth)
        ln_users = np.r_[items["ln_users"].to_numpy(), 0.0]
        return cls(table["chunk"].to_numpy(), lists, user.dictionary,
                   items["item_id"].combine_chunks(), ln_users,
                   int(state.metadata(table, "n_users")))


def _dense(size: int, codes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The codes (below ``size``) used in ``codes``, sorted, and each code's new number
    (its rank among them): one pass, no sort."""
    used = np.zeros(size, dtype=bool)
    for part in codes:
        used[part] = True
    return np.flatnonzero(used), np.cumsum(used) - 1


def _lengths(lists: pa.ListArray) -> np.ndarray:
    return np.diff(lists.offsets.to_numpy()).astype(np.int64)


def _values(lists: pa.ListArray, dtype) -> np.ndarray:
    offsets = lists.offsets.to_numpy()
    return lists.values.to_numpy()[offsets[0]:offsets[-1]].astype(dtype)


def _concat(parts: list[EncodedLists]) -> EncodedLists:
    """The chunks' lists one after the other (ground-truth rows shifted to match)."""
    shift = np.r_[0, np.cumsum([p.size for p in parts])[:-1]].astype(np.int64)
    truth = Truth(np.concatenate([p.truth.rows + s for p, s in zip(parts, shift, strict=True)]),
                  np.concatenate([p.truth.items for p in parts]),
                  np.concatenate([p.truth.grades for p in parts]))
    return EncodedLists(*(np.concatenate([getattr(p, name) for p in parts])
                          for name in ("ids", "users", "arms", "served_at", "items", "lengths",
                                       "overlap", "has_baseline")), truth)


def _take(lists: EncodedLists, rows: np.ndarray) -> EncodedLists:
    """The lists of ``rows`` (ascending), their ground truth renumbered to match."""
    starts = np.r_[0, np.cumsum(lists.lengths)[:-1]]
    lengths = lists.lengths[rows]
    flat = np.repeat(starts[rows] - np.r_[0, np.cumsum(lengths)[:-1]], lengths) \
        + np.arange(int(lengths.sum()))
    local = np.full(lists.size, -1, dtype=np.int64)
    local[rows] = np.arange(rows.size)
    mine = local[lists.truth.rows]
    keep = mine >= 0
    truth = Truth(mine[keep], lists.truth.items[keep], lists.truth.grades[keep])
    return EncodedLists(lists.ids[rows], lists.users[rows], lists.arms[rows],
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


def _changed(old: Truth, merged: Truth, n_items: int) -> np.ndarray:
    """Per pair of ``merged``: new, or its grade raised (both sorted by (row, item))."""
    before = old.rows * max(n_items, 1) + old.items
    after = merged.rows * max(n_items, 1) + merged.items
    at = np.minimum(np.searchsorted(before, after), max(before.size - 1, 0))
    if before.size == 0:
        return np.ones(after.size, dtype=bool)
    return (before[at] != after) | (old.grades[at] != merged.grades)


def kept_days(conn: sa.Connection, experiment_id: int) -> set[date]:
    """The days of the experiment that keep a stored state."""
    return set(conn.execute(sa.select(RollupProvisional.day).distinct().where(
        RollupProvisional.experiment_id == experiment_id)).scalars())


def load(conn: sa.Connection, experiment_id: int, day: date) -> list[bytes] | None:
    rows = conn.execute(sa.select(RollupProvisional.data).where(
        RollupProvisional.experiment_id == experiment_id, RollupProvisional.day == day)
        .order_by(RollupProvisional.part)).scalars().all()
    return [bytes(data) for data in rows] if len(rows) == 2 else None


def save(conn: sa.Connection, experiment_id: int, day: date,
         parts: list[memoryview] | None) -> None:
    """Replace the day's state by ``parts`` (None: drop it; the day is final)."""
    drop(conn, experiment_id, day)
    for part, data in enumerate(parts or []):
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
