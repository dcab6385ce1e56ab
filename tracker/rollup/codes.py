"""The Arrow adapter of the project's id encoder: string ids (users, items) from the
database's Arrow columns to integer codes.

Only the hashing lives here: Arrow's C hash tables (``dictionary_encode``, ``index_in``)
are about 5x faster than any Python-level pass over string ids. The code contract (int64
codes >= 0, -1 for a null, streams in one code space, sorted codes) and every numpy step
after the hashing are :mod:`tracker.metrics.encoding`'s, which this module calls.
Everything after this works on codes: numpy sorts, searches and counts integers, never
Python strings.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracker.metrics.encoding import distinct, remap, renumber, split_codes

__all__ = ["Vocabulary", "distinct", "encode", "sorted_codes"]


def encode(arrays: Sequence[pa.Array | pa.ChunkedArray]) -> tuple[list[np.ndarray], pa.Array]:
    """One dictionary over several string arrays: each array's codes (int64, -1 for null)
    and the dictionary (in order of first appearance).

    >>> codes, dictionary = encode([pa.array(["b", "a", None]), pa.array(["a", "c"])])
    >>> [c.tolist() for c in codes], dictionary.to_pylist()
    ([[0, 1, -1], [1, 2]], ['b', 'a', 'c'])
    """
    chunks = []
    for array in arrays:
        chunks.extend(array.chunks if isinstance(array, pa.ChunkedArray) else [array])
    encoded = pa.chunked_array(chunks, type=pa.string()).dictionary_encode().combine_chunks()
    indices = encoded.indices
    codes = (pc.fill_null(indices, -1) if indices.null_count else indices).to_numpy()
    return split_codes(codes.astype(np.int64), [len(a) for a in arrays]), encoded.dictionary


def sorted_codes(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Sorted distinct string ids (Arrow strings) and each value's index among them.

    >>> uniques, codes = sorted_codes(pa.array(["u2", "u1", "u2"]))
    >>> uniques.to_pylist(), codes.tolist()
    (['u1', 'u2'], [1, 0, 1])
    """
    (codes,), dictionary = encode([values])
    order = pc.array_sort_indices(dictionary).to_numpy()
    return dictionary.take(pa.array(order)), renumber(codes, order)


class Vocabulary:
    """A dictionary of string ids to dense codes that grows chunk by chunk: the chunks of a
    day share it (from any thread), so their codes mean the same ids and their results add
    up as integer arrays. Codes follow the order of arrival.

    >>> vocabulary = Vocabulary()
    >>> [c.tolist() for c in vocabulary.encode([pa.array(["b", "a", "b"])])]
    [[0, 1, 0]]
    >>> [c.tolist() for c in vocabulary.encode([pa.array(["c", "a"])])], len(vocabulary)
    ([[2, 1]], 3)
    """

    def __init__(self) -> None:
        self._ids = pa.array([], type=pa.string())
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> pa.Array:
        """Every id so far; ``ids[c]`` is the id of code ``c``."""
        return self._ids

    def codes_of(self, distinct: pa.Array) -> np.ndarray:
        """The codes of distinct ids (new ones get the next codes)."""
        with self._lock:
            known = self._ids
            where = pc.index_in(distinct, value_set=known)
            missing = where.is_null().to_numpy(zero_copy_only=False)
            self._ids = pa.concat_arrays([known, distinct.filter(pa.array(missing))]) \
                if missing.any() else known
        out = pc.fill_null(where, -1).to_numpy().astype(np.int64)
        out[missing] = len(known) + np.arange(int(missing.sum()), dtype=np.int64)
        return out

    def encode(self, arrays: Sequence[pa.Array | pa.ChunkedArray]) -> list[np.ndarray]:
        """Like :func:`encode`, in this vocabulary's codes (-1 for null). Once it holds
        ids, each array is first looked up among them (``index_in``: one probe per value,
        about half the cost of hashing the values into a new dictionary and remapping it);
        only the values not found (new ids) are hashed, in their order of arrival."""
        known = self._ids  # codes never change: a snapshot stays right
        if not len(known):
            return self._hashed(arrays)
        out, misses = [], []
        for array in arrays:
            found = pc.index_in(array, value_set=known)
            if isinstance(found, pa.ChunkedArray):
                found = found.combine_chunks()
            codes = pc.fill_null(found, -1).to_numpy().astype(np.int64) \
                if found.null_count else found.to_numpy().astype(np.int64)
            missing = np.flatnonzero(codes < 0)
            if missing.size:
                values = array.take(pa.array(missing))
                valid = values.is_valid()
                valid = (valid.combine_chunks() if isinstance(valid, pa.ChunkedArray)
                         else valid).to_numpy(zero_copy_only=False)
                missing = missing[valid]
                misses.append((codes, missing, values.filter(pa.array(valid))))
            out.append(codes)
        if misses:
            new = self._hashed([values for _, _, values in misses])
            for (codes, missing, _), fresh in zip(misses, new, strict=True):
                codes[missing] = fresh
        return out

    def _hashed(self, arrays: Sequence[pa.Array | pa.ChunkedArray]) -> list[np.ndarray]:
        """:meth:`encode` by hashing every value into one dictionary, then its codes."""
        codes, dictionary = encode(arrays)
        mapping = self.codes_of(dictionary)
        return [remap(c, mapping) for c in codes]
