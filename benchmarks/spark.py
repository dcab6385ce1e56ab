"""The rollup on Spark (local[2]) against the kernel alone and the default engine, on the
same generated day: CPU-seconds and wall time per 1M impressions, Spark's overhead over the
kernel's own CPU, the memory of the largest group, and the extrapolation to 100M and 1B
impressions a day from the per-core rate.

    .venv/bin/python benchmarks/spark.py                          # 1M, with the default engine
    .venv/bin/python benchmarks/spark.py --impressions 10000000 --no-default --lake /tmp/10m
    .venv/bin/python benchmarks/spark.py ... --bucketed     # the lake bucketed by user
    .venv/bin/python benchmarks/spark.py --no-default --lake /tmp/1m --segments surface:list,device

``--bucketed``: the rollup reads a copy of the day bucketed by user (``bucket=B/`` folders,
each file's footer naming its bucket, as ``tracker export --buckets`` writes: the groups
are then read bucket by bucket, no shuffle); the kernel is measured on the same files
either way. ``--segments``: the experiment declares these dimensions (issue 33; run the
same ``--lake`` without it for the cost they add): every list's ``context`` holds a
``surface`` (20 values, skewed, as benchmarks/segments.py) and its user's ``device`` (5).

The day: N impressions of 10 distinct items out of a 49,999-item catalog with a popularity
skew, N / 10 users in 3 arms, a 10-item baseline list on each, ~N interactions (80% on a
served item with position bias, 20% elsewhere) within the hour after serving, as Parquet
files of 1M rows (the lake layout). Measured:

- **kernel**: :func:`tracker.spark.groups.score_group` on the day in this process, file
  by file (attribution, the metric kernels, per-user sums, exposure: the work Spark
  distributes);
- **spark**: :func:`tracker.spark.rollup.rollup` on a warm local[2] session: CPU of every
  process of the session (the driver, the JVM, the Python workers: /proc, children
  included), each apart, and the JVM's JIT compiler threads (a fixed cost of a fresh
  JVM), wall time; the largest group's impressions and the Python workers' peak RSS;
- **default**: ``tracker rollup`` on SQLite after importing the same day (the import not
  timed), in a child process.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracker.lake.layout import (  # noqa: E402
    IMPRESSIONS,
    INTERACTIONS,
    TIMESTAMP,
    bucket_metadata,
    user_bucket,
)
from tracker.spark.frames import GROUP_ROWS  # noqa: E402

CATALOG = 49_999
DAY = date(2026, 10, 1)
DAY_US = 86_400_000_000
FILE_ROWS = 1_000_000
CUTOFFS = (5, 10, 20)
WINDOW = timedelta(hours=6)


def _strings(prefix: str, numbers: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(prefix, pa.array(numbers).cast(pa.string()), "")


def _lists(values: pa.Array, width: int) -> pa.Array:
    offsets = pa.array(np.arange(len(values) // width + 1, dtype=np.int32) * width)
    return pa.ListArray.from_arrays(offsets, values)


def _contexts(ids: np.ndarray, users: np.ndarray) -> pa.Array:
    """Each list's ``context``: a ``surface`` (half of them among 3 values, the rest among
    20) and its user's ``device`` (one of 5)."""
    surface = np.where(ids % 10 < 5, ids % 3, ids % 20)
    return pc.binary_join_element_wise(
        '{"surface": "s', pa.array(surface).cast(pa.string()), '", "device": "d',
        pa.array(users * 7 % 5).cast(pa.string()), '"}', "")


def generate(folder: Path, n: int, seed: int = 1) -> None:
    """One day of ``n`` impressions and ~``n`` interactions as lake files (module doc)."""
    rng = np.random.default_rng(seed)
    start = int(datetime(DAY.year, DAY.month, DAY.day, tzinfo=UTC).timestamp() * 1e6)
    users = max(n // 10, 1)
    for part, at in enumerate(range(0, n, FILE_ROWS)):
        rows = min(FILE_ROWS, n - at)
        user = rng.integers(0, users, rows)
        served = start + rng.integers(0, DAY_US, rows)
        a = np.floor(rng.random(rows) ** 3 * CATALOG).astype(np.int64)
        b = 1 + rng.integers(0, CATALOG - 1, rows)
        items = (a[:, None] + np.arange(10) * b[:, None]) % CATALOG
        baseline = np.tile((np.arange(10) * 7919) % CATALOG, rows)
        arms = np.array(["control", "t1", "t2"])[user % 3]
        ids = np.arange(at, at + rows)
        table = pa.table({
            "impression_id": _strings("d-", ids), "experiment": pa.array(["bench"] * rows),
            "arm": pa.array(arms), "user_id": _strings("u", user),
            "served_at": pa.array(served, pa.timestamp("us", tz="UTC")),
            "items": _lists(_strings("i", items.ravel()), 10),
            "scores": pa.nulls(rows, pa.list_(pa.float64())),
            "baseline_items": _lists(_strings("i", baseline), 10),
            "context": _contexts(ids, user),
            "received_at": pa.nulls(rows, TIMESTAMP)}, schema=IMPRESSIONS)
        (folder / "imp").mkdir(parents=True, exist_ok=True)
        pq.write_table(table, folder / "imp" / f"part-{part}.parquet")
        position = np.minimum(rng.geometric(0.3, rows) - 1, 9)
        on_list = rng.random(rows) < 0.8
        item = np.where(on_list, items[np.arange(rows), position],
                        rng.integers(0, CATALOG, rows))
        events = pa.table({
            "event_id": _strings("e-", ids), "user_id": _strings("u", user),
            "item_id": _strings("i", item), "event": pa.array(["click"] * rows),
            "value": pa.nulls(rows, pa.float64()),
            "occurred_at": pa.array(served + rng.integers(0, 3_600_000_000, rows),
                                    pa.timestamp("us", tz="UTC")),
            "impression_id": pa.nulls(rows, pa.string()),
            "received_at": pa.nulls(rows, TIMESTAMP)}, schema=INTERACTIONS)
        (folder / "int").mkdir(parents=True, exist_ok=True)
        pq.write_table(events, folder / "int" / f"part-{part}.parquet")


def bucketed(lake: Path, buckets: int) -> None:
    """The day's files (``imp``, ``int``) copied, bucketed by user, into ``bimp`` and
    ``bint``: ``bucket=B/part-N.parquet``, the footer naming the bucket."""
    for log in ("imp", "int"):
        for path in sorted((lake / log).glob("*.parquet")):
            table = pq.read_table(path)
            bucket = user_bucket(table["user_id"], buckets)
            for b in range(buckets):
                mine = table.filter(pa.array(bucket == b))
                out = lake / f"b{log}" / f"bucket={b}" / path.name
                out.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(mine.replace_schema_metadata(bucket_metadata(b, buckets)), out)


def _processes() -> dict[int, tuple[int, list[int], bytes]]:
    """Every process: its parent, (utime, stime, cutime, cstime) in ticks, command line."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        found[int(entry)] = (int(fields[1]), [int(x) for x in fields[11:15]], command)
    return found


def _tree_cpu(root: int) -> tuple[float, dict[int, int]]:
    """CPU-seconds of ``root`` and every process under it (reaped children included), and
    the peak RSS (bytes) of each Python worker under it."""
    split, peaks = _split_cpu(root)
    return sum(split.values()), peaks


_DAEMONS: dict[int, float] = {}
"""The last CPU-seconds seen of each pyspark daemon (with its reaped workers): a daemon
that exits mid-run (the JVM does not reap it into its own children's times) still counts
(round h-spark3: without this, runs lost the Python workers' ~45-60 CPU-s at 10M)."""


def _watch(root: int, stop: threading.Event, every: float = 1.0) -> None:
    """Sample ``root``'s tree every ``every`` s until ``stop`` (keeps :data:`_DAEMONS`)."""
    while not stop.wait(every):
        _split_cpu(root)


def _split_cpu(root: int) -> tuple[dict[str, float], dict[int, int]]:
    """CPU-seconds of ``root``'s process tree by kind: ``driver`` (this process, its
    reaped children), ``jvm`` (Spark's JVM, its own threads), ``python`` (the Python
    workers: pyspark's daemon with the workers it forked and reaped, and the last figure
    of a daemon gone since, :data:`_DAEMONS`); and each worker's peak RSS."""
    found = _processes()
    tree = {root}
    changed = True
    while changed:
        changed = False
        for pid, (parent, _, _) in found.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                changed = True
    ticks = os.sysconf("SC_CLK_TCK")
    split = {"driver": 0.0, "jvm": 0.0, "python": 0.0}
    peaks = {}
    for pid in tree:
        _, times, command = found[pid]
        if b"pyspark.daemon" in command or b"pyspark.worker" in command:
            split["python"] += sum(times) / ticks
            if b"pyspark.daemon" in command:
                _DAEMONS[pid] = sum(times) / ticks
            try:
                with open(f"/proc/{pid}/status") as f:
                    hwm = [line for line in f if line.startswith("VmHWM")]
                peaks[pid] = int(hwm[0].split()[1]) * 1024 if hwm else 0
            except OSError:
                pass
        elif command.split(b"\0")[0].endswith(b"java"):
            split["jvm"] += sum(times[:2]) / ticks
        else:
            split["driver"] += sum(times) / ticks
    split["python"] += sum(cpu for pid, cpu in _DAEMONS.items() if pid not in tree)
    return split, peaks


def _jit_cpu(root: int) -> float:
    """CPU-seconds of the JVM's JIT compiler threads (C1/C2) under ``root``."""
    found, total = _processes(), 0.0
    for pid, (parent, _, command) in found.items():
        if parent != root or not command.split(b"\0")[0].endswith(b"java"):
            continue
        for thread in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{thread}/stat") as f:
                    raw = f.read()
            except OSError:
                continue
            if "CompilerThre" in raw[raw.index("("):raw.rindex(")")]:
                fields = raw.rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _database(folder: Path, segments: list[str]) -> str:
    from tracker import Tracker
    from tracker.config import Settings
    from tracker.store import schema
    from tracker.store.db import create_engine

    url = f"sqlite:///{folder / 'tracker.db'}"
    engine = create_engine(url)
    schema.upgrade(engine)
    engine.dispose()
    with Tracker(settings=Settings(database_url=url)) as tracker:
        tracker.create_experiment("bench", {"control": 1, "t1": 1, "t2": 1}, cutoffs=CUTOFFS,
                                  relevance={"click": 1}, attribution_window=WINDOW,
                                  segments=segments)
    return url


def kernel(lake: Path) -> float:
    """CPU-seconds of the group scorer on the day in this process (popularity empty: one
    day, no day before it), file by file (each of 1M impressions with the interactions
    generated with them: at 10M the whole day does not fit in this process's memory)."""
    from tracker.spark.groups import GroupConfig, score_group

    config = GroupConfig({"click": 1.0}, int(WINDOW.total_seconds() * 1e6), CUTOFFS)
    spent = 0.0
    for part in sorted((lake / "imp").glob("*.parquet")):
        imp = pq.read_table(part)
        events = pq.read_table(lake / "int" / part.name)
        left = pa.table({"impression_id": imp["impression_id"],
                         "cell": pa.array(np.zeros(imp.num_rows, np.int64) + 1),
                         "user": imp["user_id"],
                         "served": pc.cast(imp["served_at"], pa.int64()),
                         "items": imp["items"], "baseline": imp["baseline_items"]})
        right = pa.table({"user": events["user_id"], "item": events["item_id"],
                          "event": events["event"],
                          "at": pc.cast(events["occurred_at"], pa.int64()),
                          "named": events["impression_id"]})
        before = time.process_time()
        score_group(config, DAY, left, right)
        spent += time.process_time() - before
        del imp, events, left, right
    return spent


def spark_run(lake: Path, url: str, buckets: int, conf: dict[str, str],
              logs: tuple[str, str] = ("imp", "int")) -> dict:
    from pyspark.sql import SparkSession

    from tracker.spark.rollup import rollup

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master("local[2]").appName("tracker-bench")
               .config("spark.ui.enabled", "false").config("spark.driver.memory", "4g")
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.range(10).collect()  # warm
    split0, jit0 = _split_cpu(os.getpid())[0], _jit_cpu(os.getpid())
    cpu0, wall0 = sum(split0.values()), time.perf_counter()
    for handler in logging.getLogger("tracker.spark").handlers:
        handler.last = cpu0
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(os.getpid(), stop), daemon=True)
    watcher.start()
    try:
        [summary] = rollup(spark, lake / logs[0], lake / logs[1], experiment="bench",
                           database_url=url, buckets=buckets)
    finally:
        stop.set()
        watcher.join()
    wall = time.perf_counter() - wall0
    split, peaks = _split_cpu(os.getpid())
    jit = _jit_cpu(os.getpid()) - jit0
    spark.stop()
    split = {kind: split[kind] - split0[kind] for kind in split}
    return {"cpu": sum(split.values()), "split": split, "jit": jit, "wall": wall,
            "worker_peak": max(peaks.values(), default=0),
            "impressions": summary.impressions_read}


DEFAULT_JOB = """
import resource, sys, time
sys.path.insert(0, sys.argv[2])
from tracker.config import Settings
from tracker.rollup.engine import run_rollup
from tracker.store.db import create_engine
url = sys.argv[1]
settings = Settings(database_url=url)
engine = create_engine(url, settings)
started = time.perf_counter()
run_rollup(engine, settings, "bench")
usage = resource.getrusage(resource.RUSAGE_SELF)
print(usage.ru_utime + usage.ru_stime, time.perf_counter() - started)
"""


def _without(table: pa.Table, *names: str) -> pa.Table:
    """The table without ``names`` and the lake's receipt time (the database stamps its own),
    whichever it has."""
    return table.drop_columns([n for n in (*names, "received_at") if n in table.column_names])


def default_run(lake: Path, url: str) -> tuple[float, float]:
    """CPU-seconds and wall time of the default engine on the same day (SQLite)."""
    from tracker import Tracker
    from tracker.config import Settings

    with Tracker(settings=Settings(database_url=url)) as tracker:
        for path in sorted((lake / "imp").glob("*.parquet")):
            frame = _without(pq.read_table(path), "scores", "context").to_pandas()
            tracker.log_impressions(frame, on_invalid="all_or_nothing")
        for path in sorted((lake / "int").glob("*.parquet")):
            frame = _without(pq.read_table(path), "value", "impression_id").to_pandas()
            tracker.log_interactions(frame, on_invalid="all_or_nothing")
    done = subprocess.run([sys.executable, "-c", DEFAULT_JOB, url, str(ROOT)],
                          capture_output=True, text=True, check=True)
    cpu, wall = (float(x) for x in done.stdout.split())
    return cpu, wall


def main() -> None:
    class CpuPerStep(logging.Handler):
        """Each step the rollup logs, with the CPU-seconds of every process since the
        previous one."""

        last = None

        def emit(self, record: logging.LogRecord) -> None:
            cpu = _tree_cpu(os.getpid())[0]
            spent = "" if self.last is None else f", {cpu - self.last:.1f} CPU-s"
            print(f"  step {record.getMessage()} wall{spent}")
            self.last = cpu

    logger = logging.getLogger("tracker.spark")
    logger.setLevel(logging.INFO)
    logger.addHandler(CpuPerStep())
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--impressions", type=int, default=1_000_000)
    parser.add_argument("--buckets", type=int, default=None,
                        help="user buckets (default: impressions / GROUP_ROWS)")
    parser.add_argument("--lake", type=Path, default=None,
                        help="keep the generated day in this folder and reuse it when it "
                             "is there (same size and seed)")
    parser.add_argument("--no-default", action="store_true",
                        help="skip the default engine (its import takes minutes at 10M)")
    parser.add_argument("--untuned", action="store_true",
                        help="without tracker.spark.session.TUNING (the settings the CLI's "
                             "session gets)")
    parser.add_argument("--bucketed", action="store_true",
                        help="roll up a copy of the day bucketed by user (made once, kept "
                             "in the lake folder)")
    parser.add_argument("--segments", default="", metavar="DIMS",
                        help="dimensions the experiment declares, comma-separated (e.g. "
                             "surface:list,device)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the session (after TUNING; repeatable)")
    args = parser.parse_args()
    if args.segments and not args.no_default:
        parser.error("--segments compares Spark runs: give --no-default too (the default "
                     "engine's dimensions: benchmarks/segments.py)")
    from tracker.spark.session import TUNING

    conf = {} if args.untuned else dict(TUNING)
    conf.update(item.split("=", 1) for item in args.conf)
    print(f"session settings: {conf}")
    n = args.impressions
    with tempfile.TemporaryDirectory(prefix="tracker-spark-bench-") as folder:
        folder = Path(folder)
        lake = args.lake or folder / "lake"
        if not (lake / "imp").is_dir():
            started = time.perf_counter()
            generate(lake, n)
            print(f"generated {n:,} impressions in {time.perf_counter() - started:.1f} s")
        held = sum(pq.read_metadata(path).num_rows for path in (lake / "imp").glob("*.parquet"))
        if held != n:
            parser.error(f"--lake {lake} holds {held:,} impressions, not {n:,}")
        buckets = args.buckets or max(1, -(-n // GROUP_ROWS))
        logs = ("imp", "int")
        if args.bucketed:
            logs = (f"bimp{buckets}", f"bint{buckets}")
            if not (lake / logs[0]).is_dir():
                started = time.perf_counter()
                bucketed(lake, buckets)
                for log in ("imp", "int"):
                    (lake / f"b{log}").rename(lake / f"b{log}{buckets}")
                print(f"bucketed into {buckets} in {time.perf_counter() - started:.1f} s")
        url = _database(folder, [d for d in args.segments.split(",") if d])
        kernel_cpu = kernel(lake)
        result = spark_run(lake, url, args.buckets, conf, logs)
        per_m = 1_000_000 / n
        print(f"kernel alone: {kernel_cpu:.1f} CPU-s ({kernel_cpu * per_m:.2f} per 1M)")
        print(f"spark local[2]: {result['cpu']:.1f} CPU-s ({result['cpu'] * per_m:.2f} per 1M), "
              f"wall {result['wall']:.1f} s ({result['wall'] * per_m:.2f} per 1M); "
              f"{result['cpu'] / kernel_cpu:.2f}x the kernel's CPU")
        split = result["split"]
        print(f"  of which JVM {split['jvm']:.1f} (JIT compiler threads {result['jit']:.1f}), "
              f"Python workers {split['python']:.1f}, driver {split['driver']:.1f} CPU-s; "
              f"without the JIT: {(result['cpu'] - result['jit']) / kernel_cpu:.2f}x")
        print(f"python worker peak RSS: {result['worker_peak'] / 2**20:.0f} MiB "
              f"(~{n / buckets:,.0f} impressions a group, {buckets} buckets)")
        core_rate = n / result["cpu"]
        for day in (100_000_000, 1_000_000_000):
            print(f"  {day:,} a day: {day / core_rate / 3600:.1f} core-hours "
                  f"(~{day / core_rate / 3600 / 64 * 60:.0f} min on 64 cores)")
        if not args.no_default:
            cpu, wall = default_run(lake, url)
            print(f"default engine (SQLite): {cpu:.1f} CPU-s, wall {wall:.1f} s; spark/default "
                  f"CPU {result['cpu'] / cpu:.2f}x, wall {result['wall'] / wall:.2f}x")
        print(f"peak RSS of this process: "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
