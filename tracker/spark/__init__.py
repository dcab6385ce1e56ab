"""The scale-out on Apache Spark (the ``spark`` extra: ``pip install 'recsys-tracker[spark]'``,
and Java 17+): the lake of Parquet logs read with the database's semantics
(:mod:`tracker.spark.lake`), per-list metrics through the ``tracker.metrics`` kernels in
Arrow batches (:mod:`tracker.spark.score`), and the rollup into the tracker database
(:func:`tracker.spark.rollup.rollup`, ``tracker rollup --engine spark``). Only this package
imports pyspark.
"""

from tracker.install import require

require("spark", "tracker.spark")  # before pyspark is imported: one clear error

from tracker.spark.lake import Lake, LakeError, LakeLog, read_lake, read_log  # noqa: E402

__all__ = ["Lake", "LakeError", "LakeLog", "read_lake", "read_log"]
