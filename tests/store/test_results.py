"""The rollup's stored state read back: every reader gives the bytes written (PostgreSQL
sends them in its binary result format: :func:`tracker.store.db.binary_rows`), and
``binary_rows`` gives the values SQLAlchemy's rows give."""

from __future__ import annotations

import random
from datetime import date, timedelta

import pytest
import sqlalchemy as sa

from tests.conftest import BACKEND
from tracker.store import results
from tracker.store.db import binary_rows, transaction
from tracker.store.rollup_tables import RollupUnits

DAY = date(2026, 11, 1)
EXPERIMENT = 7  # the state tables hold no foreign key: any id

BLOBS = [bytes(range(256)) * 3, b"", b"\x00'\"\\", random.Random(5).randbytes(300_000)]


SLICED = {"arm_id": 3, "segment": "surface", "slice": "home"}  # a slice's row, named back
WHOLE = {"arm_id": 0, "segment": "", "slice": ""}  # the catalog's: the whole experiment


def _write(engine: sa.Engine) -> None:
    with transaction(engine, write=True) as conn:
        results.insert_units(conn, EXPERIMENT, DAY, False, BLOBS)
        results.insert_units(conn, EXPERIMENT, DAY, True, BLOBS[::-1])
        results.insert_exposure(conn, EXPERIMENT, DAY, False,
                                [(SLICED, BLOBS[0]), (WHOLE, BLOBS[1])])
        results.insert_popularity(conn, EXPERIMENT, DAY + timedelta(days=1), 5, BLOBS[0])
        results.insert_popularity(conn, EXPERIMENT, DAY, 7, BLOBS[3])  # replaces it


def test_every_stored_state_reader_gives_back_the_bytes_written(engine):
    _write(engine)
    with transaction(engine) as conn:
        assert results.units(conn, EXPERIMENT, DAY, False) == BLOBS
        assert results.units(conn, EXPERIMENT, DAY, True) == BLOBS[::-1]
        assert results.units(conn, EXPERIMENT, DAY - timedelta(days=1), False) is None
        assert sorted(results.exposure(conn, EXPERIMENT, DAY, False), key=str) == \
            [(WHOLE, BLOBS[1]), (SLICED, BLOBS[0])]
        assert results.popularity(conn, EXPERIMENT) == (DAY, 7, BLOBS[3])
        assert results.popularity_period(conn, EXPERIMENT) == (DAY, 7)
        assert results.popularity(conn, EXPERIMENT + 1) is None


def test_binary_rows_give_the_values_of_sqlalchemys_rows(engine):
    _write(engine)
    statement = sa.select(RollupUnits.experiment_id, RollupUnits.day, RollupUnits.cumulative,
                          RollupUnits.part, RollupUnits.data).where(
        RollupUnits.experiment_id == EXPERIMENT, RollupUnits.day >= DAY,
        RollupUnits.cumulative.is_(True), RollupUnits.part.in_([0, 2, 3])
    ).order_by(RollupUnits.part)
    with transaction(engine) as conn:
        found = binary_rows(conn, statement)
        assert found == [tuple(row) for row in conn.execute(statement)]
        assert [(part, data) for *_, part, data in found] == \
            [(0, BLOBS[3]), (2, BLOBS[1]), (3, BLOBS[0])]


@pytest.mark.skipif(BACKEND != "postgresql", reason="needs PostgreSQL")
def test_the_stored_state_is_read_in_postgresqls_binary_result_format(engine, monkeypatch):
    """Each stored-state read goes through a cursor of its own in the binary result format
    (the format itself, which the values above cannot tell apart; SQLAlchemy's own
    statements keep their text cursors)."""
    import psycopg

    made = []
    cursor = psycopg.Connection.cursor

    def recorded(self, *args, **kwargs):
        made.append(cursor(self, *args, **kwargs))
        return made[-1]

    _write(engine)
    monkeypatch.setattr(psycopg.Connection, "cursor", recorded)
    with transaction(engine) as conn:
        assert results.units(conn, EXPERIMENT, DAY, False) == BLOBS
        assert results.popularity(conn, EXPERIMENT) == (DAY, 7, BLOBS[3])
    assert sum(c.format == psycopg.pq.Format.BINARY for c in made) == 2
