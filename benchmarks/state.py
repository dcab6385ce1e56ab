"""Encode and decode time of the rollup's stored unit totals: 200,000 users x 29 value
columns (the layout at k = 5, 10, 20: 9 metrics per cutoff and 2 whole-list ones), in the
self-describing Arrow IPC format (``units/1``, tracker/rollup/state.py) against the format
it replaced (a JSON array of users beside raw little-endian matrices, layout in code;
reproduced below as it was before migration 0008). Pure CPU, no database.

    .venv/bin/python benchmarks/state.py                 # 200k users, best of 7
    .venv/bin/python benchmarks/state.py --users 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracker.rollup.aggregate import UnitTotals  # noqa: E402
from tracker.rollup.outcomes import Layout  # noqa: E402

LAYOUT = Layout.for_cutoffs([5, 10, 20])


def totals(users: int, seed: int = 0) -> UnitTotals:
    """Unit totals shaped like a day's: most columns defined on every impression (their
    counts are implied), surprisal and unexpectedness not."""
    rng = np.random.default_rng(seed)
    impressions = rng.integers(1, 20, users)
    width = len(LAYOUT)
    counts = np.asfortranarray(np.repeat(impressions[:, None], width, axis=1), dtype=float)
    for j, (metric, _) in enumerate(LAYOUT.columns):
        if metric in ("surprisal", "unexpectedness"):
            counts[:, j] = rng.integers(0, 2, users) * impressions
    ids = pa.array([f"user-{i:08d}" for i in range(users)], type=pa.string())
    return UnitTotals(ids, rng.integers(1, 3, users), impressions,
                      np.asfortranarray(rng.random((users, width))), counts)


def old_encode(t: UnitTotals) -> tuple[str, bytes, bytes, bytes, bytes]:
    """The format before 0008 (one part; user ids were an object array then)."""
    full = (t.counts == t.impressions[:, None]).all(axis=0)
    return (orjson.dumps(t.users.tolist()).decode(),
            np.ascontiguousarray(t.cells, dtype="<i8").tobytes(),
            np.ascontiguousarray(t.impressions, dtype="<i8").tobytes(),
            np.ascontiguousarray(t.sums.T, dtype="<f8").tobytes(),
            full.astype(np.uint8).tobytes()
            + np.ascontiguousarray(t.counts[:, ~full].T, dtype="<f8").tobytes())


def old_decode(users: str, arms: bytes, impressions: bytes, sums: bytes, counts: bytes,
               columns: int) -> UnitTotals:
    ids = np.asarray(orjson.loads(users), dtype=object)
    impressions_ = np.frombuffer(impressions, dtype="<i8").astype(np.int64)
    full = np.frombuffer(counts[:columns], dtype=np.uint8).astype(bool)
    counted = np.empty((columns, ids.size)).T
    counted[:, full] = impressions_[:, None]
    counted[:, ~full] = np.frombuffer(counts[columns:], dtype="<f8").reshape(
        int((~full).sum()), ids.size).T
    return UnitTotals(ids, np.frombuffer(arms, dtype="<i8").astype(np.int64), impressions_,
                      np.frombuffer(sums, dtype="<f8").reshape(columns, ids.size).T.copy(
                          order="F"), counted)


def best(repeat: int, work) -> float:
    """The fastest of ``repeat`` runs, in milliseconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    t = totals(args.users)
    t_old = replace(t, users=np.asarray(t.users.to_pylist(), dtype=object))  # as it was
    old = old_encode(t_old)
    new = t.encode(LAYOUT)
    width = len(LAYOUT)
    rows = [
        ("old (JSON users + raw matrices)", best(args.repeat, lambda: old_encode(t_old)),
         best(args.repeat, lambda: old_decode(*old, width)), sum(len(p) for p in old)),
        ("Arrow IPC units/1", best(args.repeat, lambda: t.encode(LAYOUT)),
         best(args.repeat, lambda: UnitTotals.decode(new, LAYOUT)), sum(len(p) for p in new)),
    ]
    print(f"{args.users:,} users x {width} columns, best of {args.repeat}")
    print(f"{'format':34} {'encode ms':>10} {'decode ms':>10} {'MiB':>8}")
    for name, encode, decode, size in rows:
        print(f"{name:34} {encode:10.1f} {decode:10.1f} {size / 2**20:8.1f}")


if __name__ == "__main__":
    main()
