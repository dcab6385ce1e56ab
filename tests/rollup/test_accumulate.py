"""The rollup's exact accumulators (tracker.rollup.accumulate): add, retract and merge in any
order equal ``math.fsum`` of the values left, bit for bit."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.rollup.accumulate import ExactSums, exact_column_sums

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
# values of every magnitude a metric sum can hold, subnormals and signed zeros included
columns = st.lists(st.lists(finite, min_size=0, max_size=30), min_size=1, max_size=4)


def _matrix(cols: list[list[float]]) -> np.ndarray:
    rows = max(len(c) for c in cols)
    out = np.zeros((rows, len(cols)))
    for j, c in enumerate(cols):
        out[:len(c), j] = c
    return out


def _fsum_columns(matrix: np.ndarray) -> list[float]:
    return [math.fsum(matrix[:, j].tolist()) for j in range(matrix.shape[1])]


@given(columns)
@settings(max_examples=300, deadline=None)
def test_sums_equal_fsum_bit_for_bit(cols):
    matrix = _matrix(cols)
    try:
        expected = _fsum_columns(matrix)
    except OverflowError:  # fsum itself overflows: the exact sum is beyond a double
        return
    got = exact_column_sums(matrix).tolist()
    assert [v.hex() for v in got] == [v.hex() for v in expected]


@given(columns, st.randoms(use_true_random=False), st.integers(1, 5))
@settings(max_examples=200, deadline=None)
def test_any_order_and_split_of_add_retract_and_merge_equals_a_rebuild(cols, rnd, parts):
    matrix = _matrix(cols)
    rows = list(range(matrix.shape[0]))
    kept = [r for r in rows if rnd.random() < 0.6]
    try:  # the whole sum or the kept rows' beyond a double: fsum overflows as the sums do
        _fsum_columns(matrix)
        _fsum_columns(matrix[kept])
    except OverflowError:
        return
    # the rebuild: only the kept rows, in order
    rebuild = ExactSums(matrix.shape[1])
    rebuild.add(matrix[kept])
    # incremental: every row added in some order across several accumulators, merged, then
    # the rows not kept retracted in another order (a user's old row replaced by nothing)
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    accumulators = [ExactSums(matrix.shape[1]) for _ in range(parts)]
    for i, r in enumerate(shuffled):
        accumulators[i % parts].add(matrix[r])
    total = ExactSums(matrix.shape[1])
    for a in reversed(accumulators):
        total.merge(a)
    gone = [r for r in rows if r not in kept]
    rnd.shuffle(gone)
    for r in gone:
        total.retract(matrix[r])
    assert total.exact() == rebuild.exact()
    assert total.sums().tobytes() == rebuild.sums().tobytes()


@given(columns, st.lists(st.booleans(), min_size=12, max_size=12),
       st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_a_matrix_mostly_of_zero_columns_sums_as_fsum_with_dense_rows_between(cols, zero,
                                                                             rnd):
    """A matrix whose nonzero columns are few is added by those columns alone (CUPED's
    terms, most covariates 0): the same exact sums, added and retracted between dense
    rows, as ``math.fsum`` of every value."""
    values = _matrix(cols)
    wide = np.zeros((values.shape[0], 12 * values.shape[1]))
    for j in range(values.shape[1]):
        wide[:, 12 * j + rnd.randrange(12)] = values[:, j]  # a few columns hold values
    dense = np.where(np.array(zero)[None, :].repeat(wide.shape[1] // 12, 0).ravel(), 0.0,
                     rnd.uniform(-3, 3))[None, :]
    try:
        expected = _fsum_columns(np.vstack([wide, dense]))
    except OverflowError:
        return
    acc = ExactSums(wide.shape[1])
    acc.add(dense)
    acc.add(wide[::2])
    acc.add(dense)
    acc.add(wide[1::2])
    acc.retract(dense)
    assert [v.hex() for v in acc.sums().tolist()] == [v.hex() for v in expected]


EDGE = [-1.7976931348623157e+308, 5.539569662801114e+275, -9.9792015476736e+291]
"""The rows Hypothesis found: their sum rounds to the largest double; without the positive
one, it lies past it."""


@pytest.mark.parametrize("values", [EDGE, [EDGE[0], EDGE[2]], [EDGE[2], EDGE[0], 0.0]])
def test_sums_beyond_a_double_overflow_as_fsum_does(values):
    """``sums()`` raises ``OverflowError`` where ``math.fsum`` does, and gives fsum's value
    where it does not."""
    acc = ExactSums(1)
    acc.add(np.array(values)[:, None])
    try:
        expected = math.fsum(values)
    except OverflowError:
        with pytest.raises(OverflowError):
            acc.sums()
        return
    assert acc.sums()[0].hex() == expected.hex()


def test_a_float_running_sum_loses_what_the_accumulator_keeps():
    values = np.array([[1e16], [1.0], [1.0], [-1e16]])
    assert float(values[:, 0].sum()) != 2.0  # numpy's pairwise sum rounds the ones away
    assert exact_column_sums(values).tolist() == [2.0]


def test_many_batches_carry_without_losing_a_bit():
    # far more batches than the int64 bins hold between carries (the carry is exercised)
    rng = random.Random(7)
    acc, values = ExactSums(2), []
    for _ in range(1500):
        row = [rng.uniform(-1, 1) * 2.0 ** rng.randint(-60, 60) for _ in range(2)]
        values.append(row)
        acc.add(np.array(row))
    other = ExactSums(2)
    for row in values[:700]:
        other.add(np.array(row))
    acc.merge(other)
    expected = [math.fsum([r[j] for r in values] + [r[j] for r in values[:700]])
                for j in range(2)]
    assert acc.sums().tolist() == expected


@pytest.mark.parametrize("bad", [
    pytest.param(np.array([[np.nan]]), id="nan-is-refused"),
    pytest.param(np.array([[np.inf]]), id="infinity-is-refused"),
    pytest.param(np.zeros((2, 3)), id="wrong-number-of-columns-is-refused"),
])
def test_values_that_cannot_be_summed_exactly_are_refused_and_nothing_is_added(bad):
    acc = ExactSums(1)
    acc.add(np.array([[2.5]]))
    with pytest.raises(ValueError):
        acc.add(bad)
    assert acc.sums().tolist() == [2.5]


def test_merging_sums_of_other_columns_is_refused():
    with pytest.raises(ValueError, match="3 columns into 2"):
        ExactSums(2).merge(ExactSums(3))


whole = st.one_of(st.integers(-1000, 1000), st.integers(-2 ** 60, 2 ** 60)).map(float)
# a column of integers (counts, their squares and products: the rollup's most common values),
# small or beyond what 53 bits hold, or a column of any floats
mixed = st.lists(st.one_of(st.lists(whole, min_size=0, max_size=30),
                           st.lists(finite, min_size=0, max_size=30)), min_size=1, max_size=5)


@given(mixed, st.randoms(use_true_random=False), st.integers(1, 4))
@settings(max_examples=300, deadline=None)
def test_columns_of_integers_and_of_floats_added_retracted_and_merged_equal_fsum(cols, rnd,
                                                                                parts):
    """Columns of integers are summed by their float sums where that is exact (every partial
    sum within 53 bits) and by the per-value split where not: either way, in any split and
    order of adds, retracts and merges, the sums equal ``math.fsum`` of the rows left."""
    matrix = _matrix(cols)
    gone = [r for r in range(matrix.shape[0]) if rnd.random() < 0.3]
    kept = np.delete(matrix, gone, axis=0)
    try:
        expected = _fsum_columns(kept)
        _fsum_columns(matrix)
    except OverflowError:
        return
    pieces = np.array_split(np.array(rnd.sample(range(matrix.shape[0]), matrix.shape[0]),
                                     dtype=np.int64), parts)
    total = ExactSums(matrix.shape[1])
    for piece in pieces:
        acc = ExactSums(matrix.shape[1])
        acc.add(matrix[np.sort(piece)])  # several rows at once: batches of many rows
        total.merge(acc)
    if gone:
        total.retract(matrix[gone])
    assert [v.hex() for v in total.sums().tolist()] == [v.hex() for v in expected]
    rebuild = ExactSums(matrix.shape[1])
    rebuild.add(kept)
    assert total.exact() == rebuild.exact()


def test_integers_are_summed_without_splitting_each_value(monkeypatch):
    """A batch's columns of integers never reach the per-value split (the slow part), and
    the other columns do; the sums are exact either way."""
    split: list[int] = []
    real = ExactSums._add_batch

    def spy(self, matrix, sign, columns, work):
        split.append(matrix.shape[1])
        return real(self, matrix, sign, columns, work)

    monkeypatch.setattr(ExactSums, "_add_batch", spy)
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 50, size=(5000, 3)).astype(float)
    counts[:, 2] **= 2  # squares: still integers
    means = rng.random((5000, 2))
    acc = ExactSums(5)
    acc.add(counts[:, [0, 1]] @ np.eye(2, 5) + means @ np.eye(2, 5, 3))
    acc.add(np.hstack([counts, np.zeros((5000, 2))]))
    assert split == [2]  # the means, once; the integers never
    values = np.vstack([counts[:, [0, 1]] @ np.eye(2, 5) + means @ np.eye(2, 5, 3),
                        np.hstack([counts, np.zeros((5000, 2))])])
    assert acc.sums().tolist() == _fsum_columns(values)


def test_batches_of_large_integers_carry_without_losing_a_bit():
    """Sums of integers near 2**52, batch after batch, far past the batches the int64 bins
    hold between carries."""
    rng = random.Random(11)
    acc, rows = ExactSums(2), []
    for _ in range(1500):
        batch = [[float(rng.randint(-2 ** 52, 2 ** 52)), float(rng.randint(0, 9))]
                 for _ in range(2)]
        rows += batch
        acc.add(np.array(batch))
    assert acc.sums().tolist() == [math.fsum(r[j] for r in rows) for j in range(2)]
    assert acc.exact() == [sum(int(r[j]) for r in rows) << 1126 for j in range(2)]


@given(mixed, st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_values_added_into_some_columns_equal_the_full_matrix_with_zeros_elsewhere(cols, rnd):
    """``add(values, into=columns)`` puts each column of ``values`` in the accumulator's
    column of ``into``: the same exact sums as adding the full-width matrix, 0 elsewhere."""
    values = _matrix(cols)
    width = values.shape[1] + rnd.randrange(4)
    into = np.array(rnd.sample(range(width), values.shape[1]))
    full = np.zeros((values.shape[0], width))
    full[:, into] = values
    try:
        _fsum_columns(full)
    except OverflowError:
        return
    some, every = ExactSums(width), ExactSums(width)
    some.add(values, into=into)
    some.retract(values[:2], into=into)
    every.add(full)
    every.retract(full[:2])
    assert some.exact() == every.exact()


@pytest.mark.parametrize("into", [
    pytest.param([0, 0], id="a-column-twice-is-refused"),
    pytest.param([0, 3], id="a-column-beyond-the-accumulator-is-refused"),
    pytest.param([-1, 1], id="a-negative-column-is-refused"),
    pytest.param([1], id="fewer-columns-than-the-values-is-refused"),
])
def test_values_into_columns_that_are_not_distinct_columns_of_it_are_refused(into):
    acc = ExactSums(3)
    acc.add(np.array([[1.0, 2.0, 3.0]]))
    with pytest.raises(ValueError):
        acc.add(np.ones((4, 2)), into=np.array(into))
    assert acc.sums().tolist() == [1.0, 2.0, 3.0]
