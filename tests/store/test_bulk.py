"""The bulk writer's rows reach PostgreSQL in key order (the no-deadlock rule); the keyed
reads' condition selects exactly the rows named, on either database."""

from __future__ import annotations

import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from tracker.ingest.write import IMPRESSIONS
from tracker.store import bulk
from tracker.store.rollup_tables import RollupUserTotals


def _row(key: str) -> tuple:
    return (key, 1, 1, "u", 0, 0, ["a"], None, None, None)


@given(st.lists(st.text(min_size=1, max_size=8), unique=True, max_size=50))
def test_rows_for_postgresql_are_the_same_rows_sorted_by_key(keys):
    rows = [_row(k) for k in keys]
    prepared = bulk.prepare("postgresql", IMPRESSIONS.table, IMPRESSIONS.columns, rows,
                            IMPRESSIONS.key)
    assert [row[0] for row in prepared.rows] == sorted(keys)
    assert sorted(prepared.rows) == sorted(rows)


def test_one_of_selects_exactly_the_rows_of_the_values_on_either_database(engine):
    """More values than one statement binds on SQLite, ids absent from the table, ids that
    need quoting in SQL or in JSON, and none at all: the condition selects exactly the
    stored rows named."""
    table = RollupUserTotals.__table__
    stored = [f"u{i}" for i in range(40_000)] + ["it's", "a,b", '"q"', "ü", "b\\s", "{x}"]
    with engine.begin() as conn:
        bulk.insert_rows(conn, table, ("experiment_id", "user_id", "data"),
                         [(1, user, b"x") for user in stored] + [(2, "u1", b"y")])
    wanted = stored[::2] + ["absent", "u99999"]
    with engine.connect() as conn:
        def found(values):
            return conn.execute(sa.select(table.c.user_id).where(
                table.c.experiment_id == 1,
                bulk.one_of(conn, table.c.user_id, values))).scalars().all()

        assert sorted(found(wanted)) == sorted(stored[::2])
        assert sorted(found(stored[-6:])) == sorted(stored[-6:])
        assert found([]) == []
