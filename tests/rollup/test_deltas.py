"""The views' exact per-cell statistics (tracker.rollup.deltas): a view moved by users'
changes (old rows retracted, new rows added, in any order and grouping) equals the view
rebuilt from every user's current rows bit for bit, and its statistics and health equal
those the rollup computes from the same rows today (aggregate.cell_stats, aggregate.health)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.rollup.aggregate import UnitTotals, cell_stats, health
from tracker.rollup.deltas import (
    STATS,
    CellSums,
    ViewSums,
    add_totals,
    apply_change,
    health_moved,
    rows_of,
)
from tracker.rollup.outcomes import Layout

ARMS = [1, 2, 3]
COLUMNS = 4


def _day(rng: np.random.Generator, users: int, day: int, crossover: float) -> UnitTotals:
    """One day's (user, arm) rows: about half the users, each in their own arm, some also
    in another one (crossover), with metrics undefined on some impressions."""
    active = np.flatnonzero(rng.random(users) < 0.5)
    own = np.array([ARMS[u % len(ARMS)] for u in active], dtype=np.int64)
    other = rng.random(active.size) < crossover
    ids = np.r_[active, active[other]]
    arms = np.r_[own, np.array(ARMS, dtype=np.int64)[(active[other] + day) % len(ARMS)]]
    impressions = rng.integers(1, 6, ids.size).astype(np.int64)
    counts = np.minimum(impressions[:, None], rng.integers(0, 6, (ids.size, COLUMNS)))
    sums = rng.random((ids.size, COLUMNS)) * counts * rng.choice([1e-3, 1.0, 1e3], COLUMNS)
    return UnitTotals(pa.array([f"u{u:03d}" for u in ids]), arms, impressions,
                      sums, counts.astype(np.float64)).reduce()


def _rebuilt(totals: UnitTotals) -> CellSums:
    acc = CellSums(totals.sums.shape[1])
    add_totals(acc, totals)
    return acc


@given(st.integers(0, 2**32 - 1), st.integers(2, 6), st.sampled_from([0.0, 0.1, 0.4]),
       st.integers(1, 4))
@settings(max_examples=60, deadline=None)
def test_a_cumulative_view_moved_by_deltas_equals_a_rebuild_bit_for_bit(seed, days, crossover,
                                                                      groups):
    rng = np.random.default_rng(seed)
    acc, counts = CellSums(COLUMNS), health(UnitTotals.empty(COLUMNS))
    running = UnitTotals.empty(COLUMNS)
    for day in range(days):
        today = _day(rng, 40, day, crossover)
        after = UnitTotals.added([running, today], COLUMNS) if running.size else today
        changed = pa.array(sorted(set(today.users.to_pylist())))
        # the changed users applied in shuffled groups: any order and split gives one view
        order = rng.permutation(len(changed))
        for group in np.array_split(order, groups):
            users = changed.take(pa.array(group, type=pa.int64()))
            old, new = rows_of(running, users), rows_of(after, users)
            apply_change(acc, old, new)
            counts = health_moved(counts, health(old), health(new))
        running = after
        assert acc.exact() == _rebuilt(running).exact()
        assert counts == health(running)
        for got, want in zip(acc.stats(ARMS), cell_stats(running, ARMS), strict=True):
            assert got.cell == want.cell
            np.testing.assert_array_equal(got.users, want.users)
            for name in STATS[1:]:
                np.testing.assert_allclose(getattr(got, name), getattr(want, name),
                                           rtol=1e-12, atol=0, err_msg=name)


def test_erasing_a_user_retracts_exactly_what_they_added():
    rng = np.random.default_rng(7)
    totals = _day(rng, 60, 0, 0.2)
    acc = _rebuilt(totals)
    gone = pa.array(["u001", "u017"])
    apply_change(acc, rows_of(totals, gone), UnitTotals.empty(COLUMNS))
    kept = pa.array(sorted(set(totals.users.to_pylist()) - {"u001", "u017"}))
    assert acc.exact() == _rebuilt(rows_of(totals, kept)).exact()


def test_a_user_who_crosses_over_leaves_every_cell_and_merging_halves_equals_the_whole():
    one = UnitTotals(pa.array(["a", "b"]), np.array([1, 2]), np.array([2, 3]),
                     np.array([[1.0], [2.0]]), np.array([[2.0], [3.0]]))
    acc = _rebuilt(one)
    crossed = UnitTotals(pa.array(["a", "a"]), np.array([1, 2]), np.array([2, 1]),
                         np.array([[1.0], [0.5]]), np.array([[2.0], [1.0]]))
    apply_change(acc, rows_of(one, pa.array(["a"])), crossed)
    stats = {s.cell: s for s in acc.stats([1, 2])}
    assert stats[1].users.tolist() == [0] and stats[2].users.tolist() == [1]
    assert stats[2].sum.tolist() == [2.0 / 3.0]
    halves = CellSums(1)
    for part in (rows_of(one, pa.array(["a"])), rows_of(one, pa.array(["b"]))):
        piece = CellSums(1)
        add_totals(piece, part)
        halves.merge(piece)
    assert halves.exact() == _rebuilt(one).exact()


def test_rows_of_another_width_are_refused():
    with pytest.raises(ValueError, match="shape"):
        CellSums(2).add(np.array([1]), np.zeros((1, 3)), np.zeros((1, 3)))


def _sliced(rng: np.random.Generator, day: UnitTotals) -> UnitTotals:
    """``day``'s rows each also in one of five slices of its arm (a list dimension)."""
    slices = day.cells | (rng.integers(1, 6, day.size) << 24)
    return UnitTotals.added([day, UnitTotals(day.users, slices, day.impressions, day.sums,
                                             day.counts)], COLUMNS)


@given(st.integers(0, 2**32 - 1), st.integers(2, 6), st.sampled_from([0.0, 0.1, 0.4]))
@settings(max_examples=40, deadline=None)
def test_a_view_moved_by_the_changed_rows_alone_equals_a_rebuild_bit_for_bit(seed, days,
                                                                           crossover):
    """ViewSums.move retracts and adds only the rows a change moves (a user's slices a day
    did not touch stay out of the exact sums): the same sums and health as a rebuild."""
    rng = np.random.default_rng(seed)
    view, running = ViewSums(Layout.for_cutoffs([1]), cuped=False), UnitTotals.empty(COLUMNS)
    view.stats = CellSums(COLUMNS)
    for day in range(days):
        today = _sliced(rng, _day(rng, 40, day, crossover))
        after = UnitTotals.added([running, today], COLUMNS) if running.size else today
        changed = pa.array(sorted(set(today.users.to_pylist())))
        view.move(rows_of(running, changed) if running.size else running,
                  rows_of(after, changed))
        running = after
    rebuilt = ViewSums(Layout.for_cutoffs([1]), cuped=False)
    rebuilt.stats = CellSums(COLUMNS)
    rebuilt.move(UnitTotals.empty(COLUMNS), running)
    def nonzero(sums: CellSums) -> dict:  # a cell whose every user left holds zeros
        return {cell: exact for cell, exact in sums.exact().items() if any(exact)}

    assert nonzero(view.stats) == nonzero(rebuilt.stats)
    assert view.health == rebuilt.health == health(running)


def test_a_users_slices_a_day_did_not_touch_are_not_moved(monkeypatch):
    """Old and new rows of a user served again in one slice of five: the exact sums move
    by that slice's row and the arm's, not by the four rows that stayed the same."""
    def totals(cells, sums):
        column = np.array([[s] * COLUMNS for s in sums], dtype=float, order="F")
        return UnitTotals(pa.array(["u"] * len(cells)), np.array(cells, dtype=np.int64),
                          np.ones(len(cells), np.int64), column, np.ones_like(column))

    cells = [1, *(1 | s << 24 for s in range(1, 6))]
    old = totals(cells, [5.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    new = totals(cells, [6.0, 2.0, 1.0, 1.0, 1.0, 1.0])
    moved = []
    add = CellSums.add
    monkeypatch.setattr(CellSums, "add", lambda self, c, s, n, sign=1: (
        moved.append((sign, sorted(c.tolist()))), add(self, c, s, n, sign))[1])
    view = ViewSums(Layout.for_cutoffs([1]), cuped=False)
    view.stats = CellSums(COLUMNS)
    view.move(old, new)
    assert moved == [(-1, [1, 1 | 1 << 24]), (1, [1, 1 | 1 << 24])]
