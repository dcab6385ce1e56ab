"""The bulk writer's rows reach PostgreSQL in key order (the no-deadlock rule)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tracker.ingest.write import IMPRESSIONS
from tracker.store import bulk


def _row(key: str) -> tuple:
    return (key, 1, 1, "u", 0, 0, ["a"], None, None, None)


@given(st.lists(st.text(min_size=1, max_size=8), unique=True, max_size=50))
def test_rows_for_postgresql_are_the_same_rows_sorted_by_key(keys):
    rows = [_row(k) for k in keys]
    prepared = bulk.prepare("postgresql", IMPRESSIONS.table, IMPRESSIONS.columns, rows,
                            IMPRESSIONS.key)
    assert [row[0] for row in prepared.rows] == sorted(keys)
    assert sorted(prepared.rows) == sorted(rows)
