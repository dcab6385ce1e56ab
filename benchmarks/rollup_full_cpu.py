"""Wall and CPU time of ``tracker rollup --full`` over two days of N impressions on SQLite,
three times in one process: a steadier before/after check than the wall time of
benchmarks/rollup.py on a shared machine (CPU time counts every thread of the process).

    .venv/bin/python benchmarks/rollup_full_cpu.py                 # this checkout
    git archive <commit> | tar -x -C /tmp/before && \\
        .venv/bin/python benchmarks/rollup_full_cpu.py /tmp/before  # another commit's code

The logs come from benchmarks/rollup.py's generator (of the checkout measured).
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import rollup as bench  # noqa: E402

from tracker import Tracker  # noqa: E402

IMPRESSIONS, USERS = 200_000, 40_000


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = bench.fresh_url("sqlite", Path(folder), "cpu")
        experiment, arms = bench.setup(url)
        for back in (1, 0):
            bench.generate_day(url, experiment, arms, bench.NEW_DAY - timedelta(days=back),
                               IMPRESSIONS, USERS)
        runs = []
        with Tracker(url) as tracker:
            for _ in range(3):
                wall, cpu = time.perf_counter(), time.process_time()
                tracker.rollup("bench", full=True)
                runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    print(f"{ROOT}: " + "; ".join(f"wall {w:.2f} s, cpu {c:.2f} s" for w, c in runs))


if __name__ == "__main__":
    main()
