"""Throughput of the rollup's exact accumulator (:class:`tracker.rollup.accumulate.ExactSums`)
against a float sum (numpy, not exact) and ``math.fsum`` (exact, one Python call per column),
on the shape a view's deltas take: per-user values in rows, a column per metric and statistic.

    python benchmarks/accumulate.py [--rows 200000] [--columns 80] [--runs 5] [--integers 40]
    TRACKER_TREE=/other/worktree python benchmarks/accumulate.py   # another checkout's code

Prints CPU seconds (cold: the first call in the process; warm: the median of ``--runs``) and
values per second, and checks that the exact sums equal ``math.fsum``. ``--integers N``: N of
the columns hold whole numbers (counts 0-50 and their squares, as users, impressions and
pre-period counts are; 59% of the values of a day with two list dimensions), which
``ExactSums`` sums by a shorter way.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

if os.environ.get("TRACKER_TREE"):  # time another checkout's tracker (before/after pairs)
    sys.path.insert(0, os.environ["TRACKER_TREE"])

from tracker.rollup.accumulate import ExactSums  # noqa: E402


def _values(rows: int, columns: int, integers: int = 0) -> np.ndarray:
    """Values of mixed magnitudes, as per-user means, sums and impression counts are; the
    first ``integers`` columns whole numbers (counts, every other one squared)."""
    rng = np.random.default_rng(0)
    values = rng.random((rows, columns)) * rng.choice([1e-3, 1.0, 1e6], size=(rows, columns))
    counts = rng.integers(0, 50, size=(rows, integers)).astype(float)
    counts[:, 1::2] **= 2
    values[:, :integers] = counts
    return values


def _exact(values: np.ndarray) -> np.ndarray:
    sums = ExactSums(values.shape[1])
    sums.add(values)
    sums.retract(values[:1000])  # a delta: some rows out again
    return sums.sums()


def _cpu(fn, runs: int) -> tuple[float, float]:
    """(first call, median of ``runs`` more) in CPU seconds."""
    times = []
    for _ in range(runs + 1):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return times[0], statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--columns", type=int, default=80)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--integers", type=int, default=0,
                        help="how many of the columns hold whole numbers")
    args = parser.parse_args()
    values = _values(args.rows, args.columns, min(args.integers, args.columns))
    size = values.size
    exact = _exact(values)
    for j in range(min(args.columns, 8)):
        assert exact[j] == math.fsum(values[1000:, j]), j
    rows = [("ExactSums (add + retract)", _cpu(lambda: _exact(values), args.runs)),
            ("numpy float sum (not exact)", _cpu(lambda: values.sum(axis=0), args.runs)),
            ("math.fsum per column (exact)",
             _cpu(lambda: [math.fsum(values[:, j]) for j in range(args.columns)], args.runs))]
    print(f"{args.rows:,} rows x {args.columns} columns = {size / 1e6:.0f}M values; "
          f"{min(args.integers, args.columns)} of the columns whole numbers")
    print(f"{'':30s} {'cold CPU s':>10s} {'warm CPU s':>10s} {'M values/s':>11s}")
    for label, (cold, warm) in rows:
        print(f"{label:30s} {cold:10.3f} {warm:10.3f} {size / max(warm, 1e-9) / 1e6:11.0f}")


if __name__ == "__main__":
    main()
