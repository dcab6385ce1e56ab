"""The census of a lake bucketed by user, counted bucket by bucket in the Python workers
(:mod:`tracker.spark.bucket_census`), equals the scan's (:func:`tracker.spark.frames.census`)
row for row: each day's extent, the heavy users, the (user, day) rows with their earliest
served impression; on a daylight-saving day in Paris, with an arm the experiment does not
declare and another experiment's impressions in the same files. Its local days are the
default engine's."""

from __future__ import annotations

from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.rollup.scenario import create, make_logs
from tests.spark.support import SKIP_REASON
from tests.spark.test_rollup import DST, _log
from tracker.lake.export import export_logs
from tracker.rollup.days import day_of
from tracker.store.db import transaction
from tracker.store.experiments import get_experiment

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

ZONES = ["UTC", "Europe/Paris", "Asia/Kolkata", "America/St_Johns", "Pacific/Kiritimati",
         "Pacific/Pago_Pago", "Australia/Lord_Howe"]


@pytest.mark.parametrize("zone", ZONES)
def test_local_days_are_the_default_engines(zone):
    from tracker.spark.bucket_census import local_days

    rng = np.random.default_rng(7)
    spring = 1_774_746_000_000_000  # 2026-03-29 01:00 UTC: Paris moves its clocks
    micros = np.concatenate([rng.integers(-5 * 10**16, 2 * 10**17, 2000),
                             spring + np.arange(-3000, 3000) * 60_000_000])
    expected = [(day_of(int(m), zone) - date(1970, 1, 1)).days for m in micros]
    assert local_days(micros, zone).tolist() == expected


def _rows(census) -> list[tuple]:
    rows = census.per_user.select("user", "_day", "n", "last", "first").collect()
    return sorted(tuple(row) for row in rows)


def test_the_bucketed_census_equals_the_scan(spark, tracker, tmp_path):
    from tracker.spark.bucket_census import bucket_census
    from tracker.spark.buckets import lake_buckets
    from tracker.spark.frames import census, frames
    from tracker.spark.lake import read_lake

    create(tracker, timezone="Europe/Paris")
    create(tracker, "other")
    imps, events = make_logs(5, days=3, users=10, impressions=120, start=DST)
    other, _ = make_logs(6, days=2, users=10, impressions=40, start=DST, key="other")
    _log(tracker, other, [])
    _log(tracker, imps, events)
    export_logs(tracker.engine, tmp_path / "imp", tmp_path / "int", buckets=3)
    for path in sorted((tmp_path / "imp").rglob("*.parquet")):  # an arm nobody declared
        table = pq.read_table(path)
        unknown = table.set_column(table.schema.get_field_index("arm"), "arm", pa.array(
            ["unknown"] * table.num_rows)).set_column(
            0, "impression_id", pc.binary_join_element_wise(table["impression_id"], "x", ""))
        pq.write_table(pa.concat_tables([table, unknown.cast(table.schema)]), path)
    with transaction(tracker.engine) as conn:
        info = get_experiment(conn, "home")
    lake = read_lake(spark, tmp_path / "imp", tmp_path / "int")
    files = lake_buckets(lake)
    assert files is not None
    scanned = census(frames(info, lake.impressions.rows, lake.interactions.rows), 4)
    counted = bucket_census(spark, info, files, 3, 4)
    try:
        assert scanned.heavy and len(scanned.days) == 4  # the days the fixture claims
        assert counted.days == scanned.days
        assert sorted(counted.heavy) == sorted(scanned.heavy)
        assert _rows(counted) == _rows(scanned)
    finally:
        scanned.release()
        counted.release()
