"""The bulk writer's rows reach PostgreSQL in key order (the no-deadlock rule); the keyed
reads' condition selects exactly the rows named, on either database; rows given as dicts
read back as SQLAlchemy's own inserts store them."""

from __future__ import annotations

from datetime import date

import pytest
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


def _probe_table() -> sa.Table:
    return sa.Table("bulk_probe", sa.MetaData(), sa.Column("id", sa.BigInteger, primary_key=True),
                    sa.Column("day", sa.Date), sa.Column("flag", sa.Boolean),
                    sa.Column("value", sa.Double), sa.Column("name", sa.String(20)))


def test_dict_rows_read_back_as_sqlalchemy_stores_them_on_either_database(engine):
    """Dates, booleans, floats, text and nulls, in keys of any order: ``insert_dicts``
    stores what ``insert()`` stores; rows with other keys are refused with nothing stored."""
    table = _probe_table()
    rows = [{"id": 1, "day": date(2026, 2, 28), "flag": True, "value": 0.1, "name": "ü'x"},
            {"name": None, "value": -2.5e-300, "flag": False, "day": None, "id": 2},
            {"id": 3, "day": date(1999, 12, 31), "flag": None, "value": None, "name": ""}]
    table.metadata.create_all(engine)
    try:
        with engine.begin() as conn:
            bulk.insert_dicts(conn, table, rows)
            conn.execute(table.insert(), [{**row, "id": row["id"] + 10} for row in rows])
        with engine.connect() as conn:
            stored = conn.execute(sa.select(table).order_by(table.c.id)).all()
        ours, theirs = stored[:3], stored[3:]
        assert [r._asdict() for r in ours] == rows_sorted(rows)
        assert [(*r[1:],) for r in ours] == [(*r[1:],) for r in theirs]
        with pytest.raises(ValueError, match="bulk_probe"), engine.begin() as conn:
            bulk.insert_dicts(conn, table, [{"id": 4, "day": None}, {"id": 5, "flag": True}])
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 6
    finally:
        table.metadata.drop_all(engine)


def rows_sorted(rows: list[dict]) -> list[dict]:
    columns = ("id", "day", "flag", "value", "name")
    return [{c: row[c] for c in columns} for row in sorted(rows, key=lambda r: r["id"])]
