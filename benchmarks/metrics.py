"""Ranking metrics: tracker.metrics.evaluate against ranx, side by side in one run.

Data: N lists of 10 distinct items (catalog of 1,000,000 ids, Python ints), each with a
relevant set of 0..10 items (about 5 on average) drawn from a pool that holds the 10
served items and 10 unserved ones, so about half the relevant items are served.

Timed, each a median of --repeat runs:
- ours: ``metrics.evaluate(recommended, relevant, METRICS)`` from Python lists and sets
  (id encoding included), plus the split: encoding alone, and
  ``evaluate_encoded`` on integer codes (what the rollup calls);
- ranx: building ``Qrels``/``Run`` from dicts (once; it is slow) and ``evaluate`` alone
  (after a warm-up that compiles its numba kernels);
- then side by side: --repeat rounds of ours ``evaluate`` followed by ranx ``evaluate``, so
  that both see the same load on a shared machine; the ratio is taken per round.
Memory: tracemalloc peak of one ``evaluate`` call (numpy buffers included), the process's
RSS once the input is built, and its peak RSS (input data included) before ranx starts and
at the end.

    .venv/bin/python benchmarks/metrics.py                  # the full 1,000,000 lists
    .venv/bin/python benchmarks/metrics.py --n 100000       # a quick run
    .venv/bin/python benchmarks/metrics.py --ranx-n 200000  # ranx on a subsample, scaled
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracker import metrics  # noqa: E402

METRICS = ["ndcg@10", "map@10", "mrr@10", "hit_rate@10", "precision@10", "recall@10"]
# ranx names for the same quantities (ranx's map divides by |G|: only timing is compared).
RANX_METRICS = ["ndcg@10", "map@10", "mrr@10", "hit_rate@10", "precision@10", "recall@10"]
LIST_LENGTH = 10
CATALOG = 1_000_000


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(served items (n, 10), relevant pool (n, 10), relevant count per list)."""
    rng = np.random.default_rng(seed)
    offsets = np.tile(np.arange(2 * LIST_LENGTH) * 7919, (n, 1))
    pool = (rng.integers(0, CATALOG, size=(n, 1)) + rng.permuted(offsets, axis=1)) % CATALOG
    served = pool[:, :LIST_LENGTH]
    relevant_pool = rng.permuted(pool, axis=1)[:, :LIST_LENGTH]
    counts = rng.integers(0, LIST_LENGTH + 1, size=n)
    return served, relevant_pool, counts


def as_python(served, relevant_pool, counts):
    recommended = served.tolist()
    pairs = zip(relevant_pool.tolist(), counts.tolist(), strict=True)
    relevant = [set(row[:c]) for row, c in pairs]
    return recommended, relevant


def as_encoded(served, relevant_pool, counts) -> metrics.EncodedLists:
    keep = np.arange(LIST_LENGTH) < counts[:, None]
    rows = np.broadcast_to(np.arange(len(served))[:, None], keep.shape)
    return metrics.EncodedLists(served, rows[keep], relevant_pool[keep])


def timed(function, repeat: int) -> tuple[float, list[float], object]:
    """(median wall seconds, each run's wall seconds, the last result)."""
    times, result = [], None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


def cpu_seconds(function) -> float:
    """CPU seconds of one run of this process (all threads): less sensitive than wall time
    to other jobs on a shared machine."""
    gc.collect()
    start = time.process_time()
    function()
    return time.process_time() - start


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def rss_mib() -> float:
    """The process's current resident memory (Linux), or NaN elsewhere."""
    try:
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return float("nan")
    return int(line.split()[1]) / 1024


def fmt(times: list[float]) -> str:
    return "[" + ", ".join(f"{t:.3f}" for t in times) + "]"


def run_ours(n: int, repeat: int):
    """Time our side; returns (median seconds of evaluate, the evaluate call)."""
    served, relevant_pool, counts = make_data(n)
    recommended, relevant = as_python(served, relevant_pool, counts)
    served_relevant = np.mean([len(set(r) & g) for r, g in zip(recommended, relevant,
                                                                 strict=True)])
    print(f"data: {n:,} lists x {LIST_LENGTH} items, {counts.mean():.2f} relevant per list "
          f"on average, {served_relevant:.2f} of them served")
    gc.collect()
    print(f"process RSS with the input built, before any evaluate: {rss_mib():.0f} MiB")

    def ours():
        return metrics.evaluate(recommended, relevant, METRICS)

    median, times, means = timed(ours, repeat)
    print(f"ours   evaluate (6 metrics, from Python lists/sets): median {median:.3f} s "
          f"of {fmt(times)}; CPU {cpu_seconds(ours):.3f} s")
    encode_median, encode_times, _ = timed(
        lambda: metrics.encode(recommended, relevant, depth=10), repeat
    )
    print(f"         of which id encoding (encode):               median {encode_median:.3f} s "
          f"of {fmt(encode_times)}")
    lists = as_encoded(served, relevant_pool, counts)
    enc_median, enc_times, per_list = timed(
        lambda: metrics.evaluate_encoded(lists, METRICS), repeat
    )
    print(f"ours   evaluate_encoded (6 metrics, integer codes):  median {enc_median:.3f} s "
          f"of {fmt(enc_times)}")
    for name in METRICS:  # the two entry points agree
        if not np.isclose(per_list[name].mean(), means[name], rtol=0, atol=1e-12):
            raise SystemExit(f"{name}: evaluate and evaluate_encoded disagree")

    tracemalloc.start()
    ours()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"ours   peak memory of one evaluate call (tracemalloc): {peak / 2**20:.0f} MiB")
    print(f"process peak RSS so far (input lists and sets included): {peak_rss_mib():.0f} MiB")
    print("means: " + ", ".join(f"{k}={v:.4f}" for k, v in means.items()))
    return median, ours


def build_ranx(n: int, ranx_n: int):
    """Build ranx's Qrels and Run (timed); returns (its evaluate call, the scale to n)."""
    import ranx  # test/benchmark-only dependency

    served, relevant_pool, counts = make_data(n)
    served, relevant_pool, counts = served[:ranx_n], relevant_pool[:ranx_n], counts[:ranx_n]
    scale = n / ranx_n
    label = "" if ranx_n == n else f"  (measured on {ranx_n:,} lists, x{scale:g} to {n:,})"

    def dicts(rows):
        served_rows = served[rows].tolist()
        pool_rows = relevant_pool[rows].tolist()
        scores = [float(LIST_LENGTH - i) for i in range(LIST_LENGTH)]
        run = {f"q{r}": {f"d{d}": s for d, s in zip(items, scores, strict=True)}
               for r, items in zip(rows, served_rows, strict=True)}
        qrels = {f"q{r}": {f"d{d}": 1 for d in pool[:c]}
                 for r, pool, c in zip(rows, pool_rows, counts[rows].tolist(), strict=True)}
        return qrels, run

    # ranx drops queries without judgements from a Qrels; give it lists with at least one.
    rows = np.flatnonzero(counts > 0)
    warm_qrels, warm_run = dicts(rows[:100])
    ranx.evaluate(ranx.Qrels.from_dict(warm_qrels), ranx.Run.from_dict(warm_run), RANX_METRICS)

    start = time.perf_counter()
    qrels_dict, run_dict = dicts(rows)
    dict_time = time.perf_counter() - start
    start = time.perf_counter()
    qrels = ranx.Qrels.from_dict(qrels_dict)
    run = ranx.Run.from_dict(run_dict)
    build_time = time.perf_counter() - start
    del qrels_dict, run_dict
    print(f"ranx   input: the {rows.size:,} lists with judgements{label}")
    print(f"ranx   building the input dicts (str ids): {dict_time * scale:.2f} s{label}")
    print(f"ranx   Qrels.from_dict + Run.from_dict:    {build_time * scale:.2f} s{label}")

    def evaluate():
        return ranx.evaluate(qrels, run, RANX_METRICS, save_results_in_run=False)

    return evaluate, scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="lists (default 1,000,000)")
    parser.add_argument("--ranx-n", type=int, default=None,
                        help="lists given to ranx (default: --n); timings are scaled to --n")
    parser.add_argument("--repeat", type=int, default=5, help="runs per timing (median)")
    parser.add_argument("--skip-ranx", action="store_true", help="time only our side")
    args = parser.parse_args()
    ranx_n = min(args.ranx_n or args.n, args.n)

    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at start")
    _, ours = run_ours(args.n, args.repeat)
    if args.skip_ranx:
        return
    ranx_evaluate, scale = build_ranx(args.n, ranx_n)
    # Side by side: each round times ours then ranx, so both see the same machine load.
    ours_times, ranx_times = [], []
    for _ in range(args.repeat):
        ours_times.append(timed(ours, 1)[0])
        ranx_times.append(timed(ranx_evaluate, 1)[0] * scale)
    ratios = [r / o for r, o in zip(ranx_times, ours_times, strict=True)]
    print(f"side by side, {args.repeat} rounds (ours evaluate, then ranx evaluate):")
    print(f"  ours   evaluate: median {statistics.median(ours_times):.3f} s of "
          f"{fmt(ours_times)}")
    print(f"  ranx   evaluate: median {statistics.median(ranx_times):.3f} s of "
          f"{fmt(ranx_times)}")
    print(f"  ratio  ranx evaluate / ours evaluate per round: "
          f"{', '.join(f'{r:.1f}x' for r in ratios)}; median {statistics.median(ratios):.1f}x")
    print(f"process peak RSS at the end (ranx included): {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
