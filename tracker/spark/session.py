"""A SparkSession for ``tracker rollup --engine spark`` (spark-submit and notebooks bring
their own)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def session(master: str | None = None, app_name: str = "tracker-rollup") -> SparkSession:
    """The active session when there is one (spark-submit), else a new one on ``master``
    (default ``local[*]``): Python workers on this interpreter, UTC, no progress bars."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None or SparkSession.getActiveSession() is None:
        builder = builder.master(master or DEFAULT_MASTER)
    builder = (builder.config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false"))
    return builder.getOrCreate()
