"""Exact, mergeable sums of float64 values: the rollup's accumulators.

An :class:`ExactSums` holds, per column, the **exact** sum of every value added to it (an
integer superaccumulator), so that the rounded result depends only on the multiset of values
added and retracted, never on their order or grouping: adding a user's new row after
retracting the old one gives, bit for bit, what a rebuild from the current rows gives. This
is the property Beam's ``CombineFn`` (create, add, merge, extract) and Flink's ``retract``
need for incremental views, and the one a float running sum lacks (``(a + b) - b`` need not
be ``a``).

How: a finite double is ``m * 2**(e - 53)`` with ``m = frexp(x)[0] * 2**53`` an integer of at
most 53 bits and ``e`` (from ``frexp``) in ``[-1073, 1024]``. Each value's ``m`` is split into
a high and a low limb of 27 and 26 bits, and the limbs are added per (column, exponent) bin
with ``numpy.bincount``: sums of at most ``2**25`` limbs stay below ``2**53``, so bincount's
float64 additions of them are exact, and the bins are kept as int64 (room for ``2**11`` such
batches before a carry, which :meth:`ExactSums.add` performs itself). :meth:`ExactSums.sums`
combines the bins of a column into one Python integer and divides it by the scale, which
Python rounds correctly: the result equals ``math.fsum`` of the values.

Vectorised over (rows, columns): cost is a few numpy passes over the values, not a Python
operation per value (Shewchuk's partials, as ``math.fsum`` keeps, need one per value).

Integers take a shorter way. Many of the rollup's values are whole numbers: users, impression
counts and their squares, click counts, pre-period counts and their products (59% of the
values of a day with two list dimensions). A column whose values in a batch are all integers,
with ``rows * max|v| <= 2**53``, is summed by numpy's float sum: every partial sum is then an
integer of at most 53 bits, so each addition is exact, in any order. The batch's sum, an
integer, goes into the unit bin as two limbs, with no split per value
(:meth:`ExactSums._add_whole`): the same exact sums, bit for bit, for less work per value.

>>> acc = ExactSums(1)
>>> acc.add(np.array([[1e16], [1.0], [-1e16]]))
>>> acc.sums().tolist()  # a float running sum gives 0.0
[1.0]
>>> acc.retract(np.array([[1.0]]))
>>> acc.sums().tolist()
[0.0]
"""

from __future__ import annotations

import numpy as np

_BINS = 2098  # frexp's exponents of finite doubles, -1073 ... 1024
_LOW = 1073  # bin of exponent e: e + _LOW; a bin's unit is 2**(bin - _SCALE)
_SCALE = _LOW + 53
_LIMB = 26  # low limb bits (the high limb holds the other 27 and the sign)
_UNIT = 1.0 / (1 << _LIMB)
_BATCH = 1 << 25  # values per column added in one bincount: limb sums stay below 2**53
_BLOCK = 1 << 18  # values added per pass: the temporaries (2 MiB each) stay in the cache
# and are reused, where whole-matrix ones cost a page fault per 4 KiB (16M values: 1.5 s
# against 0.2 s CPU)
_SPARSE = 0.75  # a matrix whose nonzero columns are at most this share of them is added
# by those columns alone (a metric column no user of a block has: 0 in every term of it)
_CARRY_AT = 1 << 9  # batches since the last carry before the int64 bins are normalised
_WHOLE = float(1 << 53)  # a batch's column of integers with max|v| * rows at most this sums
# exactly in float64 (every partial sum an integer of at most 53 bits)


class _Work:
    """The buffers of one :meth:`ExactSums.add`, reused by each of its batches: a fresh
    temporary of a batch's size is a new mapping of memory, page-faulted 4 KiB at a time
    (an expression of two of them cost 20 times its arithmetic), a reused one is not. Each
    is flat: :meth:`of` views a contiguous ``(rows, width)`` matrix of it, for a batch of
    any width up to the one it was made for."""

    __slots__ = ("picked", "rest", "mantissa", "exponent", "high", "low", "key", "flag")

    def __init__(self, rows: int, width: int) -> None:
        size = rows * width
        self.picked, self.rest, self.mantissa = np.empty(size), np.empty(size), np.empty(size)
        self.high, self.low = np.empty(size), np.empty(size)
        self.exponent = np.empty(size, dtype=np.intc)  # frexp's exponents
        self.key = np.empty(size, dtype=np.intp)  # bincount's keys, uncopied
        self.flag = np.empty(size, dtype=bool)

    @staticmethod
    def of(buffer: np.ndarray, rows: int, width: int) -> np.ndarray:
        return buffer[:rows * width].reshape(rows, width)


class ExactSums:
    """Exact sums of the columns of float64 matrices added, retracted and merged in any
    order (create: ``ExactSums(columns)``; :meth:`add`, :meth:`retract`, :meth:`merge`;
    extract: :meth:`sums`, correctly rounded; :meth:`exact`, the exact values as integers
    over ``2**1126``, for equality and storage)."""

    __slots__ = ("columns", "_bins", "_batches", "_lo")

    def __init__(self, columns: int) -> None:
        if columns < 0:
            raise ValueError(f"columns must be >= 0, got {columns}")
        self.columns = columns
        # high and low limbs per (column, bin), for the bins [_lo, _lo + width) only: the
        # exponents the values added span (a few dozen), not every double's 2098
        self._lo = 0
        self._bins = np.zeros((2, columns, 0), dtype=np.int64)
        self._batches = 0

    def add(self, values: np.ndarray, sign: int = 1, into: np.ndarray | None = None) -> None:
        """Add the rows of ``values`` (shape (rows, columns), or (columns,) for one row);
        ``sign=-1`` retracts them; ``into``: the distinct columns of the accumulator that
        ``values``' columns are, in order (the others get nothing; None: every column).
        Raises ValueError on NaN or an infinity, whose sums are not exact (nothing is added
        then)."""
        matrix = np.asarray(values, dtype=np.float64)
        if matrix.ndim == 1:
            matrix = matrix[None, :]
        if into is not None:
            into = np.asarray(into, dtype=np.intp)
            if into.ndim != 1 or np.unique(into).size != into.size or \
                    (into.size and (into.min() < 0 or into.max() >= self.columns)):
                raise ValueError(f"into must be distinct columns of 0 ... {self.columns - 1}")
        width = self.columns if into is None else into.size
        if matrix.ndim != 2 or matrix.shape[1] != width:
            raise ValueError(f"expected values of shape (rows, {width}), got {matrix.shape}")
        if not np.isfinite(matrix).all():
            raise ValueError("ExactSums adds finite values only: got NaN or an infinity")
        picked = None  # every column; else the columns holding a nonzero value, alone
        if matrix.size:
            found = np.flatnonzero(matrix.any(axis=0))
            if found.size <= width * _SPARSE:
                picked, width = found, found.size
        targets = picked if into is None else into if picked is None else into[picked]
        rows = max(1, min(_BATCH, _BLOCK // max(width, 1), matrix.shape[0]))
        work = _Work(rows, width)
        for at in range(0, matrix.shape[0], rows):  # a batch's columns copied, not the whole
            batch = matrix[at:at + rows]
            if picked is not None:
                batch = np.take(batch, picked, axis=1, mode="clip",  # "raise" buffers its
                                out=work.of(work.picked, batch.shape[0], width))  # output
            batch, kept = self._add_integers(batch, sign, targets, work)
            if kept is None or kept.size:
                self._add_batch(batch, sign, kept, work)  # counts the batch
            else:
                self._count_batch()

    def retract(self, values: np.ndarray, into: np.ndarray | None = None) -> None:
        """Remove rows added before (the sums are then those of the rows left)."""
        self.add(values, sign=-1, into=into)

    def merge(self, other: ExactSums) -> None:
        """Add every value ``other`` holds (``other`` is unchanged)."""
        if other.columns != self.columns:
            raise ValueError(f"cannot merge sums of {other.columns} columns into "
                             f"{self.columns}")
        if self._batches + other._batches >= _CARRY_AT:
            self._carry()  # each side's bins are below 2**52 per batch since its carry
        if other._bins.shape[2]:
            self._window(other._lo, other._lo + other._bins.shape[2])[...] += other._bins
        self._batches += other._batches

    def copy(self) -> ExactSums:
        """An accumulator holding the same sums, moved on its own from now."""
        other = ExactSums(self.columns)
        other._lo, other._bins, other._batches = self._lo, self._bins.copy(), self._batches
        return other

    def _window(self, lo: int, hi: int) -> np.ndarray:
        """The bins ``[lo, hi)`` (a view: both limbs, every column), the window grown to
        hold them first."""
        width = self._bins.shape[2]
        if width == 0:
            self._lo, self._bins = lo, np.zeros((2, self.columns, hi - lo), dtype=np.int64)
        elif lo < self._lo or hi > self._lo + width:
            start, end = min(lo, self._lo), max(hi, self._lo + width)
            grown = np.zeros((2, self.columns, end - start), dtype=np.int64)
            grown[:, :, self._lo - start:self._lo - start + width] = self._bins
            self._lo, self._bins = start, grown
        return self._bins[:, :, lo - self._lo:hi - self._lo]

    @classmethod
    def of_exact(cls, totals: list[int]) -> ExactSums:
        """The accumulator whose :meth:`exact` sums are ``totals`` (stored ones)."""
        acc = cls(len(totals))
        acc._set(totals)
        return acc

    def _add_integers(self, batch: np.ndarray, sign: int, columns: np.ndarray | None,
                      work: _Work) -> tuple[np.ndarray, np.ndarray | None]:
        """Add the columns of ``batch`` that hold integers of a bounded sum (see the module
        docstring) by their float sums; returns the other columns and which of the
        accumulator's they are (``columns``: ``batch``'s, None: all)."""
        height, width = batch.shape
        if height < 2 or not (batch[0] == np.trunc(batch[0])).any():  # one row, or no
            return batch, columns  # column of integers (the first row tells most floats)
        whole = np.trunc(batch, out=work.of(work.high, height, width))
        exact = np.equal(whole, batch, out=work.of(work.flag, height, width)).all(axis=0)
        if exact.any():
            exact &= np.abs(batch, out=whole).max(axis=0) <= _WHOLE / height
        if not exact.any():
            return batch, columns
        found = np.flatnonzero(exact)
        with np.errstate(over="ignore"):  # the other columns' float sums are not used
            totals = batch.sum(axis=0)[found]
        self._add_whole(totals, found if columns is None else columns[found], sign)
        others = np.flatnonzero(~exact)
        if not others.size:
            return batch[:, :0], others
        rest = np.take(batch, others, axis=1, mode="clip",
                       out=work.of(work.rest, height, others.size))
        return rest, others if columns is None else columns[others]

    def _add_whole(self, totals: np.ndarray, columns: np.ndarray, sign: int) -> None:
        """Add ``totals`` (float64 holding integers of at most 53 bits) to ``columns``, in the
        unit bin: a high limb of the bits from 26 up and a low one of the 26 below."""
        whole = totals.astype(np.int64) * sign
        bins = self._window(_SCALE, _SCALE + 1)
        bins[0, columns, 0] += whole >> _LIMB  # floor: low is 0 ... 2**26 - 1
        bins[1, columns, 0] += whole & ((1 << _LIMB) - 1)  # (a batch's limbs: the
        # bound on the bins between carries, :data:`_CARRY_AT`, holds with them)

    def _add_batch(self, matrix: np.ndarray, sign: int, columns: np.ndarray | None,
                   work: _Work) -> None:
        """Add ``matrix``'s values (``columns``: the columns it holds, None: all; ``work``:
        buffers of at least its shape, reused from batch to batch)."""
        if matrix.size == 0:
            return
        height, width = matrix.shape
        mantissa, exponent, high, low = (work.of(a, height, width) for a in (
            work.mantissa, work.exponent, work.high, work.low))
        np.frexp(matrix, out=(mantissa, exponent))
        # the limbs as floats holding integers, exact: |whole| < 2**53, a power of two
        # scales exactly, floor is exact; whole == high * 2**26 + low, 0 <= low < 2**26
        whole = np.multiply(mantissa, float(1 << 53), out=mantissa)
        np.floor(np.multiply(whole, _UNIT, out=high), out=high)
        np.subtract(whole, np.multiply(high, float(1 << _LIMB), out=low), out=low)
        # only the exponents present get a bin: (columns x span) keys, not x 2098
        first, last = int(exponent.min()), int(exponent.max())
        span = last - first + 1
        key = work.of(work.key, height, width)
        np.add(exponent, (np.arange(width, dtype=np.intp) * span - first)[None, :], out=key)
        bins = self._window(first + _LOW, last + _LOW + 1)
        for limb, part in enumerate((high, low)):
            total = np.bincount(key.ravel(), weights=part.ravel(), minlength=width * span)
            total = total.astype(np.int64).reshape(width, span)
            if sign < 0:
                total = -total
            if columns is None:
                bins[limb] += total
            else:
                bins[limb][columns] += total
        self._count_batch()

    def _count_batch(self) -> None:
        """Normalise the bins (carry) before an int64 could overflow."""
        self._batches += 1
        if self._batches >= _CARRY_AT:
            self._carry()

    def _carry(self) -> None:
        """The same exact sums, each column rewritten into low limbs of bins 26 bits apart
        (every limb then below 2**26 in magnitude)."""
        self._set(self.exact())

    def _set(self, totals: list[int]) -> None:
        """The bins rewritten to hold the exact sums ``totals`` (one per column), each in low
        limbs of bins 26 bits apart from its lowest set bit (every limb below 2**26)."""
        if len(totals) != self.columns:
            raise ValueError(f"expected {self.columns} sums, got {len(totals)}")
        placed = []  # (column, bin, limb)
        for column, total in enumerate(totals):
            sign, rest = (-1 if total < 0 else 1), abs(total)
            if rest.bit_length() > _BINS + _LIMB:  # beyond any finite double's sums
                raise OverflowError("exact sum out of range")
            shift = ((rest & -rest).bit_length() - 1) // _LIMB * _LIMB if rest else 0
            rest >>= shift
            while rest:
                placed.append((column, shift, sign * (rest & ((1 << _LIMB) - 1))))
                rest >>= _LIMB
                shift += _LIMB
        self._lo, self._bins, self._batches = 0, np.zeros((2, self.columns, 0), np.int64), 0
        if placed:
            lo = min(b for _, b, _ in placed)
            bins = self._window(lo, max(b for _, b, _ in placed) + 1)
            for column, b, limb in placed:
                bins[1, column, b - lo] = limb

    def exact(self) -> list[int]:
        """Each column's exact sum times ``2**1126`` (an integer): equal for equal sums,
        whatever the values' order and grouping."""
        out = [0] * self.columns
        for limb, shift in ((0, self._lo + _LIMB), (1, self._lo)):
            bins = self._bins[limb]
            columns, at = np.nonzero(bins)  # one pass over every column's bins
            for column, b, value in zip(columns.tolist(), (at + shift).tolist(),
                                        bins[columns, at].tolist(), strict=True):
                out[column] += value << b
        return out

    def sums(self) -> np.ndarray:
        """Each column's exact sum rounded once to the nearest double (as ``math.fsum``)."""
        return np.array([total / (1 << _SCALE) for total in self.exact()], dtype=np.float64)


def exact_column_sums(values: np.ndarray) -> np.ndarray:
    """The columns of ``values`` (rows, columns) summed exactly, rounded once."""
    sums = ExactSums(np.asarray(values).shape[1])
    sums.add(values)
    return sums.sums()
