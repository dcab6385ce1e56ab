"""Where a cumulative day's CPU goes today, over every user seen (the day merged into every
user's totals, their encoding for ``rollup_units``, the float statistics and health, CUPED's
sums), against the rollup core's deltas (exact sums over only the day's users: their old rows
retracted, their new ones added; ``tracker.rollup.deltas``), with what CUPED's sums would add
to the deltas (35 sums per column and user, exact). Reading and writing the stored totals
(database time) come on top of today's figures.

    python benchmarks/deltas.py [--users 800000] [--changed 50000] [--cutoffs 10] [--runs 5]

``--users``: users seen so far (the cumulative view's rows); ``--changed``: users whose rows
the day changes; ``--cutoffs``: the experiment's (10: 11 layout columns; 5,10,20: 29).
Prints CPU seconds, medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyarrow as pa

from tracker.rollup.accumulate import ExactSums
from tracker.rollup.aggregate import UnitTotals, cell_stats, health
from tracker.rollup.covariates import covariate_sums, names_for
from tracker.rollup.deltas import CellSums, apply_change, health_moved, rows_of
from tracker.rollup.outcomes import Layout
from tracker.rollup.user_covariates import UserCovariates

ARMS = [1, 2]
CUPED_SUMS = 35  # per column: Σx (5), Σx_a·x_b (15), Σx·y, Σx·s, Σx·m (5 each)


def _totals(users: int, columns: int, seed: int) -> UnitTotals:
    rng = np.random.default_rng(seed)
    impressions = rng.integers(1, 30, users).astype(np.int64)
    counts = np.repeat(impressions[:, None], columns, axis=1).astype(np.float64)
    sums = rng.random((users, columns)) * counts
    ids = pa.array([f"user-{u:08d}" for u in range(users)])
    return UnitTotals(ids, np.array(ARMS, dtype=np.int64)[np.arange(users) % 2], impressions,
                      np.asfortranarray(sums), np.asfortranarray(counts))


def _median_cpu(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=800_000)
    parser.add_argument("--changed", type=int, default=50_000)
    parser.add_argument("--cutoffs", default="10")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cutoffs = [int(c) for c in args.cutoffs.split(",")]
    layout = Layout.for_cutoffs(cutoffs)
    args.columns = len(layout)
    everyone = _totals(args.users, args.columns, 0)
    names = names_for(cutoffs)
    covariates = UserCovariates(everyone.users, np.random.default_rng(3).random(
        (args.users, len(names))), names, np.zeros(args.users, dtype=np.int64))
    changed = everyone.users.slice(0, args.changed)
    old = rows_of(everyone, changed)
    moved = _totals(args.changed, args.columns, 1)  # the same users, their new rows
    new = UnitTotals(old.users, old.cells, old.impressions + moved.impressions,
                     old.sums + moved.sums, old.counts + moved.counts)

    def fresh() -> UnitTotals:  # the same rows, nothing derived from them kept
        return UnitTotals(everyone.users, everyone.cells, everyone.impressions,
                          everyone.sums, everyone.counts)

    def rebuild() -> None:  # arm statistics and health of a cumulative day, as today
        rows = fresh()
        cell_stats(rows, ARMS)
        health(rows)

    def rebuild_cuped() -> None:
        covariate_sums(fresh(), covariates, layout, ARMS)

    stored_health = health(everyone)  # a view's counts are stored: not computed again
    day = UnitTotals(new.users, new.cells, moved.impressions, moved.sums, moved.counts)

    def merge() -> None:  # the day's rows added to every user's: a sort of every user
        UnitTotals.added([fresh(), day], args.columns)

    def encode() -> None:  # every user's totals encoded for rollup_units (zstd)
        fresh().encode(layout)

    def deltas() -> None:
        acc = CellSums(args.columns)
        apply_change(acc, old, new)
        health_moved(stored_health, health(old), health(new))
        acc.stats(ARMS)

    def cuped_deltas() -> None:  # the same users' covariate sums, retracted and added
        terms = np.random.default_rng(2).random((2048, CUPED_SUMS * args.columns))
        acc = ExactSums(terms.shape[1])
        for _ in range(0, 2 * args.changed, 2048):
            acc.add(terms)

    figures = [("today: merge the day into every user", _median_cpu(merge, args.runs)),
               ("today: encode every user's totals", _median_cpu(encode, args.runs)),
               ("today: float statistics of every user", _median_cpu(rebuild, args.runs)),
               ("today: CUPED's sums over every user", _median_cpu(rebuild_cuped, args.runs)),
               ("deltas: exact, changed users only", _median_cpu(deltas, args.runs)),
               ("  + CUPED's sums as exact deltas", _median_cpu(cuped_deltas, args.runs))]
    print(f"{args.users:,} users seen, {args.changed:,} changed, {args.columns} columns "
          f"(CPU s, median of {args.runs})")
    for label, seconds in figures:
        print(f"{label:38s} {seconds:7.3f}")


if __name__ == "__main__":
    main()
