"""The same demo logs give the same rollup on SQLite and on PostgreSQL (run when the suite
runs against PostgreSQL: it needs both)."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from tests.conftest import PG_URL, migrated
from tracker import Tracker
from tracker.demo import DemoConfig, load

SMALL = DemoConfig(days=3, users=300, items=300, start=datetime(2026, 11, 1, tzinfo=UTC))
NOW = datetime(2026, 11, 20, tzinfo=UTC)


@pytest.mark.skipif(not PG_URL, reason="compares with PostgreSQL: set TRACKER_TEST_DATABASE_URL")
def test_demo_rollup_is_the_same_on_sqlite_and_postgresql(tracker, tmp_path):
    with Tracker(migrated(f"sqlite:///{tmp_path / 'other.db'}")) as sqlite_tracker:
        tables = {}
        for name, t in (("postgresql", tracker), ("sqlite", sqlite_tracker)):
            load(t, SMALL)
            t.rollup(SMALL.key, now=NOW)
            tables[name] = {cumulative: t.metric_table(SMALL.key, cumulative)
                            for cumulative in (False, True)}
            tables[name]["health"] = t.health_table(SMALL.key, True)
    for part in (False, True, "health"):
        pg, lite = tables["postgresql"][part], tables["sqlite"][part]
        assert len(pg) == len(lite) > 0
        pd.testing.assert_frame_equal(pg, lite, check_exact=False, rtol=1e-12, atol=1e-12)
