"""How fresh an experiment's data is after a rollup on Spark: the newest event times of its
rows in the lake ("data through"), by the definition the default engine reads in the
database (:meth:`tracker.store.results.NewestEvents.found`): the newest list served, and
the newest interaction that can answer one of the experiment's lists (same user, inside the
attribution window after it).

Two small Spark jobs, as the database's two index walks: the newest ``served`` of the
experiment's impressions (those of its declared arms, the ones the run rolled up), then
the interactions of the range that definition asks for (``occurred_at`` bounds reach the
Parquet files' statistics), each joined to its user's lists of the window before it.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from tracker.spark.frames import Frames
from tracker.store.results import NewestEvents
from tracker.store.types import from_micros


def newest_in_lake(f: Frames, before: NewestEvents | None = None) -> NewestEvents:
    """The newest event times of ``f``'s experiment in the lake's logs, never older than
    ``before``'s (the previous summary's)."""
    newest_list = f.impressions.agg(F.max("served")).first()[0]
    window = f.info.attribution_window

    def newest_answer(after: int, through: int) -> int | None:
        # a coarse bound on the lake's own column (Parquet's statistics skip the other
        # files and row groups), then the exact one on the microseconds
        occurred = F.col("occurred_at")
        candidates = f.interactions.where(
            (occurred >= F.lit(from_micros(after))) & (occurred <= F.lit(from_micros(through)))
        ).where((F.col("at") > after) & (F.col("at") <= through)).select("user", "at")
        lists = f.impressions.where(F.col("served") > after - f.window_us).select(
            F.col("user").alias("listed_user"), "served")
        answered = candidates.join(lists, (F.col("user") == F.col("listed_user"))
                                   & (F.col("served") <= F.col("at"))
                                   & (F.col("served") >= F.col("at") - f.window_us))
        return answered.agg(F.max("at")).first()[0]

    return NewestEvents.found(None if newest_list is None else from_micros(newest_list),
                              window, newest_answer, before)

