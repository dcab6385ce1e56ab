"""Per-list metrics on Spark through the project's own kernels (a first step of the Spark
rollup, issue 16; attribution is not here).

The lists are grouped into buckets of users (``pmod(xxhash64(user_id), buckets)``); each
bucket reaches Python as one Arrow table (``groupBy(...).applyInArrow``), its item ids are
coded by Arrow's hash table (:func:`pyarrow.compute.dictionary_encode`), and the values come
from :func:`tracker.metrics.evaluate_encoded`: the metric formulas live once, in
``tracker.metrics``, never in Spark SQL. A bucket is held whole in the Python worker: about
``rows / buckets`` lists at a time, so raise ``buckets`` with the data.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tracker.metrics import EncodedLists, evaluate_encoded, parse_metric

BUCKETS = 64
"""User buckets of a scoring job (Spark groups; each is one Arrow table in a worker)."""

KEY = "impression_id"
INPUT = ("impression_id", "user_id", "items", "relevant")
"""The input columns: ``impression_id`` and ``user_id`` strings, ``items`` array<string>
(the ranked list), ``relevant`` array<struct<item: string, grade: double>> (its
judgements; empty or null when nothing was relevant; grade 0 is not relevant, a pair given
twice keeps its largest grade)."""


def score_lists(lists: DataFrame, metrics: Sequence[str], *,
                buckets: int = BUCKETS) -> DataFrame:
    """One row per input row: ``impression_id`` and one double column per metric name
    (``"ndcg@10"``, ``"r_precision"``), each the value of :mod:`tracker.metrics` for that
    list. An unknown metric name raises ValueError before any job runs."""
    names = [str(parse_metric(name)) for name in metrics]
    if not names:
        raise ValueError("score_lists needs at least one metric name")
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    missing = [c for c in INPUT if c not in lists.columns]
    if missing:
        raise ValueError(f"the lists lack the column(s) {', '.join(missing)}; "
                         f"expected {', '.join(INPUT)}")
    schema = T.StructType([T.StructField(KEY, T.StringType(), False)]
                          + [T.StructField(name, T.DoubleType(), False) for name in names])
    bucketed = lists.select(*INPUT).withColumn(
        "_bucket", F.pmod(F.xxhash64("user_id"), F.lit(buckets)))

    def score(table: pa.Table) -> pa.Table:
        return score_table(table, names)

    return bucketed.groupBy("_bucket").applyInArrow(score, schema)


def score_table(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """The kernel of one bucket, pure Arrow and numpy: ``impression_id`` and each metric
    of ``names`` per row of ``table`` (columns :data:`INPUT`).

    >>> table = pa.table({"impression_id": ["a", "b"], "user_id": ["u", "v"],
    ...                   "items": [["x", "y"], ["z"]],
    ...                   "relevant": [[{"item": "y", "grade": 1.0}], None]})
    >>> score_table(table, ["mrr@2", "hit_rate@2"]).to_pydict()
    {'impression_id': ['a', 'b'], 'mrr@2': [0.5, 0.0], 'hit_rate@2': [1.0, 0.0]}
    """
    items = _one_chunk(table["items"])
    relevant = _one_chunk(table["relevant"])
    lengths = pc.list_value_length(items).fill_null(0).to_numpy(zero_copy_only=False)
    judged = pc.list_value_length(relevant).fill_null(0).to_numpy(zero_copy_only=False)
    pairs = pc.list_flatten(relevant)
    listed = pc.list_flatten(items)
    truth = pairs.field("item") if len(pairs) else pa.array([], pa.string())
    codes = pc.dictionary_encode(pa.concat_arrays([listed.cast(pa.string()),
                                                   truth.cast(pa.string())])).indices
    codes = codes.to_numpy(zero_copy_only=False).astype(np.int64)
    grades = (pairs.field("grade").to_numpy(zero_copy_only=False).astype(np.float64)
              if len(pairs) else np.empty(0))
    encoded = EncodedLists.from_flat(
        item_codes=codes[:len(listed)], lengths=lengths,
        truth_row=np.repeat(np.arange(lengths.size), judged),
        truth_item=codes[len(listed):], truth_grade=grades)
    values = evaluate_encoded(encoded, names, workers=1)
    return pa.table({KEY: table[KEY], **{name: pa.array(values[name], pa.float64())
                                         for name in names}})


def _one_chunk(column: pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
