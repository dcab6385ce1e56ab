"""A provisional day's chunk parts read back into one set of arrays
(:meth:`tracker.rollup.provisional.ProvisionalDay.decode`).

Each read chunk of the day is two stored streams, ``provisional-lists/2`` and
``provisional-truth/1`` (:mod:`tracker.rollup.state`). They are read in two passes over
the chunks, each pass on :data:`~tracker.rollup.pipeline.SCORERS` threads:

1. every chunk's two streams are read and checked (Arrow's zstd decompression, which
   releases the GIL: the chunks decompress side by side);
2. the day's arrays are allocated once at their final size, and each chunk's columns are
   copied into its own slice of them.

Decoding chunk by chunk and concatenating afterwards copied every value twice, and both
copies touched fresh memory: on the dense benchmark's provisional day (1M lists, 7 chunks)
most of that time was the kernel faulting pages in, on one thread. Here each value is
copied once, and the page faults of the slices are taken by two threads. The arrays are
those :meth:`~tracker.rollup.provisional.ProvisionalDay.encode` wrote, value for value and
dtype for dtype (``tests/rollup/test_chunk_parts.py`` round-trips random days).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tracker.errors import StaleState
from tracker.rollup import state
from tracker.rollup.columnar import EncodedLists
from tracker.rollup.pipeline import SCORERS
from tracker.rollup.truth import Truth


@dataclass(frozen=True)
class ChunkTables:
    """One chunk's two streams, read and checked: its lists, their served items and ground
    truth as Arrow list arrays."""

    lists: pa.Table
    served: pa.ListArray
    truth_items: pa.ListArray
    truth_grades: pa.ListArray

    @property
    def size(self) -> int:
        return self.lists.num_rows


def read_chunk(lists_part: bytes, truth_part: bytes, cutoffs: list[int]) -> ChunkTables:
    """One chunk's streams; a stream missing a column the cutoffs need, or truth rows that
    do not match the lists, raise :class:`~tracker.errors.StaleState`."""
    table = state.read(lists_part, state.PROVISIONAL_LISTS)
    state.require(table, ["id", "user", "cell", "served_at", "items", "has_baseline",
                          *_overlaps(cutoffs)], state.PROVISIONAL_LISTS)
    truth = state.read(truth_part, state.PROVISIONAL_TRUTH)
    state.require(truth, ["truth_items", "truth_grades"], state.PROVISIONAL_TRUTH)
    if truth.num_rows != table.num_rows:
        raise StaleState(f"stored rollup state ({state.PROVISIONAL_TRUTH}) holds "
                         f"{truth.num_rows} rows for {table.num_rows} lists; run `tracker "
                         "rollup --full` to recompute the stored state")
    return ChunkTables(table, table["items"].combine_chunks(),
                       truth["truth_items"].combine_chunks(),
                       truth["truth_grades"].combine_chunks())


def decode_chunks(parts: list[tuple[bytes, bytes]], cutoffs: list[int]
                  ) -> tuple[EncodedLists, np.ndarray]:
    """The chunks' lists one after the other, ground-truth rows numbered across the day
    (user and item codes and lengths int32, the overlaps int8, or int16 where a chunk
    holds one past 127), and the number of lists of each chunk."""
    with ThreadPoolExecutor(max_workers=SCORERS) as pool:
        chunks = list(pool.map(lambda p: read_chunk(*p, cutoffs), parts))
        day = _Day.allocate(chunks, len(cutoffs))
        list(pool.map(lambda c: day.fill(c, chunks[c], cutoffs), range(len(chunks))))
    return day.lists, np.diff(day.at_list)


@dataclass(frozen=True)
class _Day:
    """The day's arrays, and where each chunk's lists, items and pairs start in them."""

    lists: EncodedLists
    at_list: np.ndarray
    at_item: np.ndarray
    at_pair: np.ndarray

    @classmethod
    def allocate(cls, chunks: list[ChunkTables], width: int) -> _Day:
        at_list = np.r_[0, np.cumsum([c.size for c in chunks])].astype(np.int64)
        at_item = np.r_[0, np.cumsum([_count(c.served) for c in chunks])].astype(np.int64)
        at_pair = np.r_[0, np.cumsum([_count(c.truth_items) for c in chunks])].astype(np.int64)
        small = np.result_type(np.int8, *(c.lists[name].type.to_pandas_dtype()
                                          for c in chunks for name in c.lists.column_names
                                          if name.startswith("overlap@")))
        n, items, pairs = int(at_list[-1]), int(at_item[-1]), int(at_pair[-1])
        truth = Truth(np.empty(pairs, np.int64), np.empty(pairs, np.int32),
                      np.empty(pairs, np.float64))
        lists = EncodedLists(np.empty(n, np.int64), np.empty(n, np.int32),
                             np.empty(n, np.int64), np.empty(n, np.int64),
                             np.empty(items, np.int32), np.empty(n, np.int32),
                             np.empty((n, width), small), np.empty(n, bool), truth)
        return cls(lists, at_list, at_item, at_pair)

    def fill(self, c: int, chunk: ChunkTables, cutoffs: list[int]) -> None:
        """Chunk ``c``'s columns copied into its slices."""
        rows = slice(int(self.at_list[c]), int(self.at_list[c + 1]))
        out, table = self.lists, chunk.lists
        for target, name in ((out.ids, "id"), (out.users, "user"), (out.cells, "cell"),
                             (out.served_at, "served_at")):
            target[rows] = table[name].to_numpy()
        out.has_baseline[rows] = table["has_baseline"].to_numpy()
        for j, name in enumerate(_overlaps(cutoffs)):
            out.overlap[rows, j] = table[name].to_numpy()
        out.items[self.at_item[c]:self.at_item[c + 1]] = _values(chunk.served)
        out.lengths[rows] = np.diff(chunk.served.offsets.to_numpy())
        pairs = slice(int(self.at_pair[c]), int(self.at_pair[c + 1]))
        out.truth.rows[pairs] = np.repeat(np.arange(rows.start, rows.stop, dtype=np.int64),
                                          np.diff(chunk.truth_items.offsets.to_numpy()))
        out.truth.items[pairs] = _values(chunk.truth_items)
        out.truth.grades[pairs] = _values(chunk.truth_grades)


def _overlaps(cutoffs: list[int]) -> list[str]:
    return [f"overlap@{k}" for k in cutoffs]


def _count(lists: pa.ListArray) -> int:
    offsets = lists.offsets
    return int(offsets[-1].as_py() - offsets[0].as_py()) if len(offsets) else 0


def _values(lists: pa.ListArray) -> np.ndarray:
    """The flat values of ``lists`` (those its offsets span)."""
    offsets = lists.offsets.to_numpy()
    return lists.values.to_numpy()[offsets[0]:offsets[-1]]
