"""CUPED's covariates on a lake bucketed by user (``tracker export --buckets``): read bucket
by bucket in the Python workers (:mod:`tracker.spark.pre_period`), they equal the default
engine's (a pre-period history in another experiment, rows received after first exposure,
a user without history), whether a bucket is one task or cut into parts; an incremental
run equals a from-scratch one; a history row in the wrong bucket's file fails the run.
On both databases."""

from __future__ import annotations

import logging
import shutil
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.helpers import T0
from tests.rollup.scenario import CUTOFFS
from tests.spark.support import SKIP_REASON
from tests.spark.test_cuped import (
    NOW,
    _all_logged,
    _check_from_scratch,
    _check_the_history_matters,
    _default_covariates,
    _first_batches_logged,
    _forget,
    _log,
    _outcome,
    _spark_covariates,
    _spark_rollup,
    assert_close,
)
from tracker.lake import layout
from tracker.lake.export import export_logs
from tracker.rollup.covariates import names_for

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

BUCKET_PATH = "covariates: bucket by bucket"


def _export(tracker, lake: Path, buckets: int, taken: set[str] | None = None) -> set[str]:
    """Add the database's logs, bucketed, to ``lake``: every row, or those whose id is not
    in ``taken`` (new files beside the old, each keeping its bucket); returns every id."""
    staging = lake.parent / f"{lake.name}-export"
    export_logs(tracker.engine, staging / "imp", staging / "int", overwrite=True,
                buckets=buckets)
    ids = set()
    for log, key in (("imp", "impression_id"), ("int", "event_id")):
        for path in sorted((staging / log).rglob("*.parquet")):
            table = pq.read_table(path)
            ids |= set(table[key].to_pylist())
            if taken is not None:
                table = table.filter(pc.invert(pc.is_in(table[key],
                                                        value_set=pa.array(sorted(taken)))))
            if not table.num_rows:
                continue
            relative = path.relative_to(staging / log)
            target = lake / log / relative.parent / f"run-{len(taken or ())}-{relative.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, target)
            assert layout.BUCKETS in pq.read_metadata(target).metadata
    shutil.rmtree(staging)
    return ids


@pytest.mark.parametrize("buckets,users_per_group", [(3, 20_000), (2, 1)],
                         ids=["a-task-per-bucket", "buckets-cut-into-parts"])
def test_bucketed_covariates_equal_the_default_engines(spark, tracker, tmp_path, caplog,
                                                        monkeypatch, buckets,
                                                        users_per_group):
    monkeypatch.setattr("tracker.spark.covariates.USERS_PER_GROUP", users_per_group)
    _all_logged(tracker, 3)
    tracker.rollup("home", now=NOW)
    expected, expected_x = _outcome(tracker), _default_covariates(tracker)
    _check_the_history_matters(expected, expected_x)
    _export(tracker, tmp_path / "lake", buckets)
    _forget(tracker)
    with caplog.at_level(logging.INFO, logger="tracker.spark"):
        _spark_rollup(spark, tracker, tmp_path / "lake", tmp_path / "state", full=True)
    parts = 1 if users_per_group > 100 else 6  # 12 users over 2 buckets, 1 a part
    assert f"{BUCKET_PATH} (" in caplog.text
    assert f"{parts} part(s) a bucket" in caplog.text
    assert not (tmp_path / "state" / "home" / "covariate-users.arrow").exists()
    assert_close(_spark_covariates(tmp_path / "state"), expected_x, "covariates")
    assert_close(_outcome(tracker), expected, "outcome")


def test_an_incremental_bucketed_run_gives_the_tables_of_a_from_scratch_run(spark, tracker,
                                                                            tmp_path, caplog):
    second = _first_batches_logged(tracker, 2)  # u-new's first exposure: the third batch
    lake, state = tmp_path / "lake", tmp_path / "state"
    taken = _export(tracker, lake, 3)
    [one] = _spark_rollup(spark, tracker, lake, state)
    assert one.full
    for imps, events in second:
        _log(tracker, imps, events)
    taken = _export(tracker, lake, 3, taken)
    [two] = _spark_rollup(spark, tracker, lake, state)
    assert not two.full and two.days_recomputed
    # a user new on the last day, with a history logged long before: bucket by bucket
    _log(tracker, [{"impression_id": "home-new", "experiment": "home", "arm": "control",
                    "user_id": "u-new", "items": ["i1", "i2"],
                    "served_at": T0 + timedelta(days=2, hours=20)}], [])
    _export(tracker, lake, 3, taken)
    with caplog.at_level(logging.INFO, logger="tracker.spark"):
        [three] = _spark_rollup(spark, tracker, lake, state)
    assert not three.full
    assert f"{BUCKET_PATH} (1 task(s)" in caplog.text
    names = names_for(CUTOFFS)
    assert _spark_covariates(state)["u-new"][names.index("pre_interactions")] == 1.0
    _check_from_scratch(spark, tracker, lake, state, tmp_path / "scratch")


def test_a_history_row_in_another_buckets_file_fails_the_run(spark, tracker, tmp_path):
    # lists of the other experiment: no scoring task reads them, the covariate tasks do
    from tracker.spark.lake import LakeError

    _all_logged(tracker, 3)
    lake = tmp_path / "lake"
    _export(tracker, lake, 2)
    for path in sorted((lake / "imp").rglob("*.parquet")):
        table = pq.read_table(path)
        other = pc.equal(table["experiment"], "other")
        if pc.any(other).as_py():
            break
    bucket = int(table.schema.metadata[layout.BUCKET])
    pq.write_table(table.filter(pc.invert(other)), path)
    target = lake / "imp" / f"bucket={1 - bucket}" / "moved.parquet"
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.filter(other).replace_schema_metadata(
        layout.bucket_metadata(1 - bucket, 2)), target)
    with pytest.raises(LakeError, match="holds user .* of another bucket"):
        _spark_rollup(spark, tracker, lake, tmp_path / "state", full=True)
