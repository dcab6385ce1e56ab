"""The lake: the logs as Parquet files, the layout :mod:`tracker.spark` reads and
``tracker export`` writes (:mod:`tracker.lake.layout`, :mod:`tracker.lake.export`).

Pure pyarrow: nothing here imports pyspark, so the export works from the core install.
"""
