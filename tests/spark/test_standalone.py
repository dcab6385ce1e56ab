"""Smoke tests against a standalone master and worker on 127.0.0.1 (started and stopped by
process id in tests/spark/conftest.py): the lake reader and the rollup run there as on
local[2]. Once (the SQLite pass): the cluster takes ~15 s to start.

The job runs in a child interpreter: a process holds one SparkContext, and this run's is the
local[2] one."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import BACKEND
from tests.rollup.scenario import create, make_logs
from tests.spark.conftest import LOCAL_CONF, ROOT, spark_environment
from tests.spark.lakefiles import T, impression, interaction, write, write_interactions
from tests.spark.rollups import assert_same_rows, report_rows, write_lake
from tests.spark.support import SKIP_REASON

pytestmark = [pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON)),
              pytest.mark.skipif(BACKEND != "sqlite",
                                 reason="a standalone cluster is smoke-tested once (SQLite)")]

JOB = """
import json, sys
from pyspark.sql import SparkSession
from tracker.spark import read_lake

master, conf, impressions, interactions = sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:]
builder = SparkSession.builder.master(master).appName("tracker-standalone-smoke")
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
lake = read_lake(spark, impressions, interactions)
print(json.dumps({
    "executors": spark.sparkContext.getConf().get("spark.master"),
    "impressions": sorted(r.impression_id for r in lake.impressions.rows.collect()),
    "conflicts": list(lake.impressions.conflict_sample),
    "interactions": lake.interactions.rows.count(),
}))
spark.stop()
"""


def test_the_lake_reads_the_same_on_a_standalone_cluster(standalone, tmp_path):
    write(tmp_path / "imp" / "day=2026-03-29" / "part-0.parquet",
          [impression("a"), impression("b"), impression("b"), impression("c", arm="x")])
    write(tmp_path / "imp" / "day=2026-03-30" / "part-0.parquet",
          [impression("c", arm="y", served_at=T + timedelta(days=1))])
    write_interactions(tmp_path / "int" / "part-0.parquet",
                       [interaction("e1"), interaction("e2"), interaction("e1")])
    conf = {**LOCAL_CONF, "spark.executor.memory": "512m", "spark.cores.max": "1"}
    done = subprocess.run(
        [sys.executable, "-c", JOB, standalone.master, json.dumps(conf),
         str(tmp_path / "imp"), str(tmp_path / "int")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**spark_environment(), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"executors": standalone.master, "impressions": ["a", "b", "c"],
                      "conflicts": ["c"], "interactions": 2}
    assert "Registering app tracker-standalone-smoke" in (standalone.logs / "master.log") \
        .read_text(errors="replace")


ROLLUP_JOB = """
import json, sys
from datetime import datetime
from pyspark.sql import SparkSession
from tracker.spark.rollup import rollup

master, conf, url, lake, state, now = sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:]
builder = SparkSession.builder.master(master).appName("tracker-standalone-rollup")
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
[summary] = rollup(spark, lake + "/imp", lake + "/int", experiment="home", database_url=url,
                   state=state, now=datetime.fromisoformat(now), buckets=2)
print(json.dumps(summary.to_dict()))
spark.stop()
"""


def test_the_rollup_runs_on_a_standalone_cluster(standalone, tracker, tmp_path):
    now = datetime(2026, 11, 20, tzinfo=UTC)
    create(tracker)
    imps, events = make_logs(seed=4, days=2, users=8, impressions=40)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=now)
    expected = report_rows(tracker.engine)
    write_lake(tmp_path / "lake", imps, events)
    conf = {**LOCAL_CONF, "spark.executor.memory": "512m", "spark.cores.max": "1"}
    done = subprocess.run(
        [sys.executable, "-c", ROLLUP_JOB, standalone.master, json.dumps(conf),
         tracker.engine.url.render_as_string(hide_password=False), str(tmp_path / "lake"),
         str(tmp_path / "state"), now.isoformat()],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**spark_environment(), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["full"] and summary["days_recomputed"]
    assert_same_rows(report_rows(tracker.engine), expected)
    assert "Registering app tracker-standalone-rollup" in (standalone.logs / "master.log") \
        .read_text(errors="replace")
