"""Dashboard render time: the experiment page for 90 days x 4 arms x all metrics x 3 cutoffs,
on SQLite and PostgreSQL; with ``--browser``, page timings in a real headless Chromium at
1280 px (time to the decision cards and to the complete page, cold and warm) and the
experiments list with 50 experiments.

    .venv/bin/python benchmarks/dashboard.py [--db sqlite|postgresql|both] [--days 90]
    .venv/bin/python benchmarks/dashboard.py --browser [--db sqlite] [--experiments 50]

The rollup tables are filled directly with plausible sufficient statistics (the benchmark
measures the dashboard's reads and statistics, not the rollup): per day and arm, every user
metric of the rollup's layout at k = 5, 10, 20 (27 rows) plus r_precision and song_clicks,
the set metrics (9 rows), daily and cumulative, and the health rows. The page is rendered with
Streamlit's AppTest (the same script run as in a browser session, without the network):
"cold" with every cache cleared, "warm" on a rerun within the cache's lifetime.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracker import Tracker  # noqa: E402
from tracker.rollup.outcomes import Layout  # noqa: E402
from tracker.store import schema  # noqa: E402
from tracker.store.db import create_engine  # noqa: E402
from tracker.store.rollup_tables import RollupDay, RollupHealth, RollupMetric  # noqa: E402

PG_URL = os.environ.get("TRACKER_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
ARMS = ("control", "two-tower", "diverse", "graph")
CUTOFFS = (5, 10, 20)


def fill(url: str, days: int, key: str = "bench-dash") -> str:
    engine = create_engine(url)
    schema.upgrade(engine)
    first = date(2026, 8, 1)
    with Tracker(url) as t:
        info = t.create_experiment(key, arms=dict.fromkeys(ARMS, 1.0),
                                   control="control", cutoffs=CUTOFFS,
                                   starts_at=datetime(2026, 8, 1, tzinfo=UTC))
    rng = np.random.default_rng(0)
    layout = Layout.for_cutoffs(CUTOFFS)
    metrics, health, day_rows = [], [], []
    for d in range(days):
        day = first + timedelta(days=d)
        for cumulative in (False, True):
            scale = d + 1 if cumulative else 1
            for arm in info.arms:
                users = int(20_000 * scale ** 0.7)
                for metric, k in layout.columns:
                    mean = rng.uniform(0.05, 0.6)
                    sd = mean * 1.5
                    total = mean * users
                    metrics.append({
                        "experiment_id": info.id, "day": day, "cumulative": cumulative,
                        "arm_id": arm.id, "metric": metric, "k": k, "kind": "user",
                        "users": users, "sum": total,
                        "sum_sq": (sd**2) * (users - 1) + total**2 / users,
                        "impressions": 3.0 * users, "impressions_sq": 12.0 * users,
                        "ratio_sum": 3 * total, "ratio_sum_sq": 12 * total,
                        "ratio_cross": 9 * total, "provisional": d == days - 1})
                for metric in ("coverage", "gini", "entropy"):
                    for k in CUTOFFS:
                        value = float(rng.uniform(0.1, 0.9))
                        metrics.append({
                            "experiment_id": info.id, "day": day, "cumulative": cumulative,
                            "arm_id": arm.id, "metric": metric, "k": k, "kind": "set",
                            "users": users, "sum": value, "sum_sq": value * value,
                            "impressions": 0.0, "impressions_sq": 0.0, "ratio_sum": 0.0,
                            "ratio_sum_sq": 0.0, "ratio_cross": 0.0,
                            "provisional": d == days - 1})
                health.append({"experiment_id": info.id, "day": day, "cumulative": cumulative,
                               "arm_id": arm.id, "users": users, "impressions": 3 * users,
                               "crossover_users": users // 500, "provisional": d == days - 1})
            health.append({"experiment_id": info.id, "day": day, "cumulative": cumulative,
                           "arm_id": 0, "users": 4 * int(20_000 * scale ** 0.7),
                           "impressions": 12 * int(20_000 * scale ** 0.7),
                           "crossover_users": 4 * (int(20_000 * scale ** 0.7) // 500),
                           "provisional": d == days - 1})
        noon = datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=12)
        day_rows.append({"experiment_id": info.id, "day": day, "impressions": 240_000,
                         "users": 80_000, "closes_at": noon + timedelta(days=2),
                         "computed_at": noon + timedelta(days=3 if d < days - 1 else 1)})
    with engine.begin() as conn:
        conn.execute(sa.insert(RollupMetric), metrics)
        conn.execute(sa.insert(RollupHealth), health)
        conn.execute(sa.insert(RollupDay), day_rows)
    engine.dispose()
    print(f"  filled: {len(metrics):,} metric rows, {len(health):,} health rows", flush=True)
    return info.key


def render(url: str, key: str, repeat: int) -> tuple[list[float], list[float]]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["TRACKER_DATABASE_URL"] = url
    cold, warm = [], []
    for _ in range(repeat):
        st.cache_data.clear()
        st.cache_resource.clear()
        at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
        at.query_params["experiment"] = key
        began = time.perf_counter()
        at.switch_page("views/experiment.py").run()  # straight to the page, caches empty
        cold.append(time.perf_counter() - began)
        assert not at.exception, [e.value for e in at.exception]
        assert at.subheader[0].value == "Decision" and len(at.dataframe) >= 1
        began = time.perf_counter()
        at.run()
        warm.append(time.perf_counter() - began)
    return cold, warm


DECISION = "document.querySelector('.tr-decision') !== null"
# complete: the results and the open chart tab's two charts (the metric and its lift); the
# other tabs (lift by days since exposure, users per arm) draw their chart when opened
COMPLETE = ("document.querySelectorAll('.vega-embed canvas, .vega-embed svg').length >= 2 && "
            "document.body.innerText.includes('Users per arm') && "
            "document.querySelector('table.tr-table') !== null && "
            "document.querySelector('[data-testid=\"stSpinner\"]') === null")
LISTED = "document.querySelector('.tr-list') !== null"


def _until(browser, conditions: dict[str, str], began: float, timeout: float = 120.0
           ) -> dict[str, float]:
    """Seconds from ``began`` until each JavaScript condition first held (polled every 20 ms).
    Complete: the three charts over time (metric, lift, users; the benchmark's tables have no
    exposure-day rows, so that section is a note), the results table, no spinner left."""
    seen: dict[str, float] = {}
    while len(seen) < len(conditions):
        for name, condition in conditions.items():
            if name not in seen and browser.evaluate(condition):
                seen[name] = time.perf_counter() - began
        if time.perf_counter() - began > timeout:
            raise TimeoutError(f"still waiting for {set(conditions) - set(seen)}")
        time.sleep(0.02)
    return seen


def browser_timings(url: str, days: int, experiments: int, repeat: int) -> None:
    """Serve ``tracker dashboard`` on ``url`` and time pages in Chromium at 1280 px: the
    experiment page (decision cards, complete) cold (first load after the server started:
    every cache empty) and warm (reloads), and the experiments list with ``experiments``
    experiments whose summaries the rollup stored."""
    import signal
    import subprocess

    from tests.dashboard.browser import Browser, free_port, wait_for_http
    from tracker.publish import publish_summary

    key = fill(url, days)
    for i in range(experiments - 1):
        fill(url, 14, key=f"bench-list-{i:02d}")
    engine = create_engine(url)
    for info in Tracker(url).experiments():
        publish_summary(engine, info.key)  # as the end of a rollup run does
    engine.dispose()
    print(f"  {experiments} experiments, summaries stored", flush=True)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tracker.cli", "dashboard", "--port", str(port)],
        env={**os.environ, "TRACKER_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/_stcore/health", timeout=90)
        with Browser() as browser:
            page = f"{base}/experiment?experiment={key}"
            runs = []
            for i in range(repeat + 1):
                began = time.perf_counter()
                browser.call("Page.navigate", url=page)
                runs.append(_until(browser, {"decision": DECISION, "complete": COMPLETE},
                                   began))
                print(f"    experiment page {'cold' if i == 0 else 'warm'}: decision cards "
                      f"{runs[-1]['decision']:.2f} s, complete {runs[-1]['complete']:.2f} s",
                      flush=True)
            warm = runs[1:]
            print(f"  experiment page (1280 px): cold decision {runs[0]['decision']:.2f} s, "
                  f"complete {runs[0]['complete']:.2f} s; warm median decision "
                  f"{statistics.median(r['decision'] for r in warm):.2f} s, complete "
                  f"{statistics.median(r['complete'] for r in warm):.2f} s", flush=True)
            listed = []
            for _ in range(repeat + 1):
                began = time.perf_counter()
                browser.call("Page.navigate", url=f"{base}/")
                listed.append(_until(browser, {"list": LISTED}, began)["list"])
            print(f"  experiments list, {experiments} experiments (1280 px): first "
                  f"{listed[0]:.2f} s, then median {statistics.median(listed[1:]):.2f} s",
                  flush=True)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--browser", action="store_true",
                        help="time pages in headless Chromium at 1280 px instead")
    parser.add_argument("--experiments", type=int, default=50,
                        help="experiments on the list page (--browser)")
    args = parser.parse_args()
    if args.browser:
        with tempfile.TemporaryDirectory(prefix="tracker-bench-") as tmp:
            print(f"dashboard in Chromium: experiment page of {args.days} days x {len(ARMS)} "
                  f"arms, list of {args.experiments} experiments (SQLite)", flush=True)
            browser_timings(f"sqlite:///{Path(tmp) / 'dash.db'}", args.days,
                            args.experiments, args.repeat)
        return
    kinds = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    print(f"dashboard render: experiment page, {args.days} days x {len(ARMS)} arms x "
          f"{len(Layout.for_cutoffs(CUTOFFS).columns) + 9} metric columns "
          f"(k = {', '.join(map(str, CUTOFFS))}), daily and cumulative", flush=True)
    for kind in kinds:
        with tempfile.TemporaryDirectory(prefix="tracker-bench-") as tmp:
            if kind == "sqlite":
                url = f"sqlite:///{Path(tmp) / 'dash.db'}"
            else:
                admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
                with admin.connect() as conn:
                    conn.exec_driver_sql("DROP SCHEMA IF EXISTS bench_dash CASCADE")
                    conn.exec_driver_sql("CREATE SCHEMA bench_dash")
                url = f"{PG_URL}?options=-csearch_path%3Dbench_dash"
            try:
                key = fill(url, args.days)
                cold, warm = render(url, key, args.repeat)
                print(f"  {kind:10} experiment page: cold median {statistics.median(cold):.2f} s"
                      f" (max {max(cold):.2f}), warm median {statistics.median(warm):.2f} s "
                      f"over {args.repeat} renders", flush=True)
            finally:
                if kind == "postgresql":
                    with admin.connect() as conn:
                        conn.exec_driver_sql("DROP SCHEMA IF EXISTS bench_dash CASCADE")
                    admin.dispose()


if __name__ == "__main__":
    main()
