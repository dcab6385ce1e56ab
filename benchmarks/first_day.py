"""Where a first day's rollup spends its time: one day of N impressions generated as
benchmarks/rollup.py does (kept, so that several trees can be timed on the same rows), then
a full rollup of it (the work of a first day) in this process, with the wall seconds of the
engine's steps and of the CUPED covariates' parts.

    .venv/bin/python benchmarks/first_day.py --db postgresql --generate   # once: the day
    .venv/bin/python benchmarks/first_day.py --db postgresql --nightly    # a timed rollup
    TRACKER_TREE=/other/worktree .venv/bin/python benchmarks/first_day.py --db sqlite  # its code

``--nightly`` runs at 00:30 after the day (its windows still open: provisional), else at
the machine's clock (final). The rows live in the schema ``bench_first_day`` (PostgreSQL)
or ``$TMPDIR/bench_first_day.db`` (SQLite) until ``--drop``. Spans overlap
(a step holds its parts) and are summed over calls, each with the CPU seconds of the
thread that ran it (a step in a thread pool: its threads'); the CPU seconds of the whole
process (every thread) and, on PostgreSQL, of the server's processes serving the bench
database (polled from /proc: a server on this machine) are printed first. On two cores the
CPU is what a busy machine makes the wall follow.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rollup as bench  # noqa: E402  (benchmarks/rollup.py: the same generated rows)

if os.environ.get("TRACKER_TREE"):  # time another checkout's tracker (before/after pairs)
    for module in [m for m in sys.modules if m == "tracker" or m.startswith("tracker.")]:
        del sys.modules[module]
    sys.path.insert(0, os.environ["TRACKER_TREE"])

NAME = "bench_first_day"
SPANS = [  # (module, attribute, label): the wall time of each call is summed
    ("tracker.rollup.engine", "_Run._plan", "plan"),
    ("tracker.rollup.engine", "_Run._compute_days", "days (read, score, write)"),
    ("tracker.rollup.day", "DayScorer.read_chunk", "  chunks read (reader threads)"),
    ("tracker.rollup.day", "DayScorer._whole_day_interactions", "  the day's interactions read"),
    ("tracker.rollup.day", "score_chunk", "  chunks scored (scorer threads)"),
    ("tracker.rollup.columnar", "Vocabulary.encode", "    ids encoded"),
    ("tracker.rollup.columnar", "Interactions.of_users", "    the chunk's users' interactions"),
    ("tracker.rollup.columnar", "_ground_truth", "    ground truth"),
    ("tracker.rollup.columnar", "_overlaps", "    overlaps with the baseline"),
    ("tracker.rollup.columnar", "score_encoded", "    metrics"),
    ("tracker.rollup.columnar", "exposures", "    exposure"),
    ("tracker.rollup.day", "DayFold.add", "  chunks folded"),
    ("tracker.rollup.day", "DayScorer.own_pairs", "  the day's own pairs"),
    ("tracker.rollup.engine", "_Run._commit", "last transaction"),
    ("tracker.rollup.engine", "covariates.ahead", "CUPED covariates read ahead (thread)"),
    ("tracker.rollup.engine", "covariates.refresh", "  CUPED covariates of new users"),
    ("tracker.rollup.covariates", "_first_exposures", "    first exposures"),
    ("tracker.rollup.first_exposures", "DayFirsts.add", "    first exposures from the chunks"),
    ("tracker.rollup.covariates", "interactions", "    pre-period interactions"),
    ("tracker.rollup.pre_metrics", "_lists", "    pre-period lists"),
    ("tracker.rollup.engine", "covariates.publish_daily", "  CUPED daily sums"),
    ("tracker.rollup.engine", "recompute_cumulative", "  cumulative pass"),
    ("tracker.rollup.cumulative", "cuped.write_sums", "    CUPED cumulative sums"),
    ("tracker.rollup.cumulative", "cuped.settle", "    CUPED covariates stored"),
]


def _url(kind: str) -> str:
    if kind == "sqlite":
        return f"sqlite:///{Path(tempfile.gettempdir()) / (NAME + '.db')}"
    return f"{bench.PG_URL}?options=-csearch_path%3D{NAME}"


def _timed(spans: dict, label: str, function, cpu: dict | None = None):
    @functools.wraps(function)
    def timed(*args, **kwargs):
        began, thread = time.perf_counter(), time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spans[label] = spans.get(label, 0.0) + time.perf_counter() - began
            if cpu is not None:  # the calling thread's CPU (numpy, Arrow and ADBC count)
                cpu[label] = cpu.get(label, 0.0) + time.thread_time() - thread
    return timed


def instrument(spans: dict, table: list[tuple[str, str, str]] = SPANS,
               cpu: dict | None = None) -> None:
    """Wrap each attribute of ``table`` so that its calls' wall seconds add up in
    ``spans[label]`` (and the calling threads' CPU seconds in ``cpu[label]``);
    benchmarks/next_day.py uses it too."""
    for module, path, label in table:
        try:
            owner = importlib.import_module(module)
        except ImportError:  # a tree without the module: not shown
            continue
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        if hasattr(owner, name):  # a tree without the part: not shown
            setattr(owner, name, _timed(spans, label, getattr(owner, name), cpu))


class ServerCpu:
    """CPU seconds of the local PostgreSQL server's processes serving ``database`` (and
    their parallel workers), polled from /proc every ``every`` seconds in a thread while
    in use (a backend's last moment before it ends is missed). Other databases' work on
    the same server is left out. ``seconds`` is None when no such process was seen."""

    def __init__(self, database: str, every: float = 0.1) -> None:
        self.database, self.every = database, every
        self.seen: dict[str, float] = {}
        self.before: dict[str, float] = {}  # the processes found at the start: so far
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> ServerCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def seconds(self) -> float | None:
        return sum(self.seen.values()) - sum(self.before.values()) if self.seen else None

    def _poll(self) -> None:
        ticks, first = os.sysconf("SC_CLK_TCK"), True
        while True:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    line = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                    if not line.startswith("postgres:"):
                        continue
                    mine = f" {self.database} " in line or any(
                        f"parallel worker for PID {leader}" in line for leader in self.seen)
                    if mine:
                        stat = Path(f"/proc/{pid}/stat").read_text()
                        fields = stat[stat.rindex(")") + 2:].split()
                        self.seen[pid] = (int(fields[11]) + int(fields[12])) / ticks
                except OSError:
                    continue
            if first:
                self.before, first = dict(self.seen), False
            if self._stop.wait(self.every):
                return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql"], required=True)
    parser.add_argument("--generate", action="store_true", help="generate the day first")
    parser.add_argument("--drop", action="store_true", help="drop the generated rows")
    parser.add_argument("--impressions", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--nightly", action="store_true")
    args = parser.parse_args()
    day = bench.NEW_DAY - timedelta(days=1)
    if args.drop:
        bench.drop(args.db, NAME)
        if args.db == "sqlite":  # the file, its WAL and the rollup's lock files
            for path in Path(tempfile.gettempdir()).glob(NAME + ".db*"):
                path.unlink()
        return
    url = _url(args.db)
    if args.generate:
        if args.db == "sqlite":
            Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
        url = bench.fresh_url(args.db, Path(tempfile.gettempdir()), NAME)
        experiment, arms = bench.setup(url)
        seconds = bench.generate_day(url, experiment, arms, day, args.impressions, args.users)
        print(f"generated {args.impressions:,} impressions in {seconds:.0f} s", flush=True)
    from tracker import Tracker

    spans: dict[str, float] = {}
    span_cpu: dict[str, float] = {}
    instrument(spans, cpu=span_cpu)
    now = bench.nightly(day) if args.nightly else None
    with Tracker(url) as tracker:
        database = bench.PG_URL.rsplit("/", 1)[-1].split("?")[0]
        with ServerCpu(database) if args.db == "postgresql" else nullcontext() as server:
            began, cpu = time.perf_counter(), time.process_time()
            tracker.rollup("bench", full=True, now=now)
            total, cpu = time.perf_counter() - began, time.process_time() - cpu
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    import tracker

    print(f"{args.db} first day ({'nightly' if args.nightly else 'final'}): {total:.2f} s "
          f"(load average {load}; tracker of {Path(tracker.__file__).parents[1]})")
    print(f"  CPU of this process (all threads)  {cpu:7.2f} s" + (
        "" if server is None or server.seconds is None
        else f"; of the PostgreSQL server (this database) {server.seconds:.2f} s"))
    print(f"  {'step (spans overlap)':38} {'wall':>8} {'CPU':>8}")
    for _, _, label in SPANS:
        if label in spans:
            print(f"  {label:38} {spans[label]:7.2f}s {span_cpu[label]:7.2f}s")


if __name__ == "__main__":
    main()
