"""A SparkSession for ``tracker rollup --engine spark`` (spark-submit and notebooks bring
their own)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"

TUNING = {
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
    "spark.executor.extraJavaOptions": "-XX:+UseParallelGC",
    "spark.shuffle.compress": "false",
    "spark.shuffle.spill.compress": "false",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
}
"""Settings of the session :func:`session` builds (measured in the history of
benchmarks/README.md, "Spark (issue 16 speed, branch h-spark3)"): the throughput
collector (a rollup is a batch job: no pause target to keep),
shuffle files not compressed (local disks: lz4 costs more CPU than the bytes it saves),
and Arrow batches of 100,000 rows to the Python workers (a group is concatenated into one
table anyway). A session brought by spark-submit or a notebook keeps its own settings."""


def session(master: str | None = None, app_name: str = "tracker-rollup") -> SparkSession:
    """The active session when there is one (spark-submit), else a new one on ``master``
    (default ``local[*]``) with :data:`TUNING`: Python workers on this interpreter, UTC,
    no progress bars."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None or SparkSession.getActiveSession() is None:
        builder = builder.master(master or DEFAULT_MASTER)
    for key, value in TUNING.items():
        builder = builder.config(key, value)
    builder = (builder.config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false"))
    return builder.getOrCreate()
