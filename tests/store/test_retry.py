"""Transient failures are retried, then reported as StoreUnavailable; nothing else is retried
and no driver exception leaves the store. The failures are real (tests/store/faults.py)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import BACKEND
from tests.helpers import count, impression, make_experiment
from tests.store.faults import ALWAYS, fail_statements, statements_failed, write_lock_held
from tracker.config import Settings
from tracker.errors import ConfigError, StoreError, StoreUnavailable, TransientStoreError
from tracker.store.db import RetryPolicy, create_engine, in_transaction, transaction

PG_ONLY = pytest.mark.skipif(BACKEND != "postgresql", reason="needs PostgreSQL")
SQLITE_ONLY = pytest.mark.skipif(BACKEND != "sqlite", reason="needs SQLite")

PG_FAILURES = [
    pytest.param("40P01", "deadlock detected", id="deadlock-is-retried", marks=PG_ONLY),
    pytest.param("40001", "serialization failure", id="serialization-failure-is-retried",
                 marks=PG_ONLY),
    pytest.param(None, "connection lost", id="terminated-backend-is-retried", marks=PG_ONLY),
]


def _engine(url: str, retries: int) -> sa.Engine:
    return create_engine(url, Settings(database_url=url, store_retries=retries,
                                       sqlite_busy_timeout_ms=50))


@pytest.fixture
def scratch(db_url):
    """An engine on the test database with a table ``scratch(k primary key)``."""
    engine = _engine(db_url, retries=20)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE scratch (k VARCHAR(10) PRIMARY KEY)")
    yield engine
    engine.dispose()


def _insert(attempts: list[int]):
    def work(conn: sa.Connection) -> int:
        attempts.append(1)
        conn.exec_driver_sql("INSERT INTO scratch (k) VALUES ('a')")
        return len(attempts)
    return work


@pytest.mark.parametrize(("sqlstate", "reason"), PG_FAILURES)
def test_a_transient_failure_runs_the_unit_of_work_again(scratch, sqlstate, reason):
    fail_statements(scratch, "scratch", 1, sqlstate)
    attempts: list[int] = []
    assert in_transaction(scratch, _insert(attempts)) == 2
    assert count(scratch, "scratch") == 1


@SQLITE_ONLY
def test_a_busy_sqlite_database_runs_the_unit_of_work_again(scratch, db_url):
    attempts: list[int] = []
    with write_lock_held(db_url, 0.3):  # longer than the 50 ms busy timeout
        assert in_transaction(scratch, _insert(attempts)) >= 2
    assert count(scratch, "scratch") == 1


@pytest.mark.parametrize(("sqlstate", "reason"), PG_FAILURES)
def test_transient_failures_past_the_bound_raise_store_unavailable(db_url, scratch, sqlstate,
                                                                    reason):
    fail_statements(scratch, "scratch", ALWAYS, sqlstate)
    engine = _engine(db_url, retries=2)
    with pytest.raises(StoreUnavailable) as raised:
        in_transaction(engine, _insert([]))
    assert type(raised.value) is StoreUnavailable  # no longer transient: callers stop here
    assert reason in str(raised.value) and "3 attempts" in str(raised.value)
    assert statements_failed(scratch) == 3
    assert count(scratch, "scratch") == 0


@SQLITE_ONLY
def test_a_sqlite_database_busy_past_the_bound_raises_store_unavailable(db_url, scratch):
    engine = _engine(db_url, retries=1)
    with write_lock_held(db_url, 1.0), pytest.raises(StoreUnavailable) as raised:
        in_transaction(engine, _insert([]))
    assert type(raised.value) is StoreUnavailable
    assert "busy" in str(raised.value) and "2 attempts" in str(raised.value)


def _unique_violation_through_sqlalchemy(conn: sa.Connection) -> None:
    conn.exec_driver_sql("INSERT INTO scratch (k) VALUES ('a')")
    conn.exec_driver_sql("INSERT INTO scratch (k) VALUES ('a')")


def _syntax_error_through_the_raw_driver(conn: sa.Connection) -> None:
    cursor = conn.connection.driver_connection.cursor()  # as tracker.store.bulk does
    cursor.execute("INSERT INTO scratch (k) VALUS ('a')")


def _value_too_large_for_an_index(conn: sa.Connection) -> None:
    conn.exec_driver_sql("CREATE TABLE wide (v TEXT PRIMARY KEY)")  # dropped with the rollback
    conn.exec_driver_sql(  # 9,600 hexadecimal digits that do not compress: over 2,704 bytes
        "INSERT INTO wide SELECT string_agg(md5(i::text), '') FROM generate_series(1, 300) i")


@pytest.mark.parametrize("work", [
    pytest.param(_unique_violation_through_sqlalchemy, id="unique-violation-via-sqlalchemy"),
    pytest.param(_syntax_error_through_the_raw_driver, id="syntax-error-via-raw-driver-cursor"),
    pytest.param(_value_too_large_for_an_index, id="program-limit-exceeded", marks=PG_ONLY),
])
def test_an_error_that_would_repeat_is_raised_at_once_as_store_error(scratch, work):
    attempts: list[int] = []

    def counted(conn: sa.Connection) -> None:
        attempts.append(1)
        work(conn)

    with pytest.raises(StoreError) as raised:
        in_transaction(scratch, counted)
    assert not isinstance(raised.value, StoreUnavailable)
    assert type(raised.value).__module__ == "tracker.errors"
    assert attempts == [1]
    assert count(scratch, "scratch") == 0


@PG_ONLY
def test_a_connection_terminated_mid_transaction_surfaces_as_store_unavailable(scratch):
    admin = sa.create_engine(scratch.url, isolation_level="AUTOCOMMIT")
    with pytest.raises(StoreUnavailable) as raised, transaction(scratch, write=True) as conn:
        conn.exec_driver_sql("INSERT INTO scratch (k) VALUES ('a')")
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        with admin.connect() as other:
            other.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})")
        conn.exec_driver_sql("INSERT INTO scratch (k) VALUES ('b')")
    admin.dispose()
    assert isinstance(raised.value, TransientStoreError)
    assert type(raised.value).__module__ == "tracker.errors"
    with transaction(scratch) as conn:  # the pool recovers: the next transaction works
        assert conn.exec_driver_sql("SELECT count(*) FROM scratch").scalar_one() == 0


# ------------------------------------------------------------------ through the ingest path


@pytest.mark.parametrize("sqlstate", [
    pytest.param("40001", id="serialization-failure-in-the-copy", marks=PG_ONLY),
    pytest.param(None, id="terminated-backend-in-the-copy", marks=PG_ONLY),
])
def test_a_logged_batch_meeting_a_transient_failure_is_stored_once(db_url, sqlstate):
    from tracker import Tracker

    with Tracker(settings=Settings(database_url=db_url, store_retries=3)) as t:
        make_experiment(t)
        fail_statements(t.engine, "impression", 1, sqlstate)
        result = t.log_impressions([impression(i) for i in range(50)])
        assert (result.stored, result.duplicates, result.conflicts) == (50, 0, 0)
        assert count(t.engine, "impression") == 50
        assert statements_failed(t.engine) == 2


@SQLITE_ONLY
def test_a_logged_batch_waiting_past_the_busy_timeout_is_stored_once(db_url):
    from tracker import Tracker

    settings = Settings(database_url=db_url, store_retries=20, sqlite_busy_timeout_ms=50)
    with Tracker(settings=settings) as t:
        make_experiment(t)
        with write_lock_held(db_url, 0.3):
            result = t.log_impressions([impression(i) for i in range(50)])
        assert (result.stored, result.duplicates, result.conflicts) == (50, 0, 0)
        assert count(t.engine, "impression") == 50


# ------------------------------------------------------------------ the policy, pure


@given(retries=st.integers(0, 12), base=st.floats(0.001, 1.0), cap=st.floats(0.001, 5.0))
def test_each_pause_lies_within_its_exponential_bound(retries, base, cap):
    pauses = list(RetryPolicy(retries=retries, base_delay=base, max_delay=cap).pauses())
    assert len(pauses) == retries
    assert all(0.0 <= p <= min(cap, base * 2 ** n) for n, p in enumerate(pauses))


@pytest.mark.parametrize(("raw", "expected"), [
    pytest.param("0", 0, id="zero-turns-retries-off"),
    pytest.param("7", 7, id="a-whole-number-is-taken"),
])
def test_store_retries_setting_is_read(raw, expected):
    assert Settings.from_env({"TRACKER_STORE_RETRIES": raw}).store_retries == expected


@pytest.mark.parametrize("raw", [pytest.param("-1", id="negative"),
                                 pytest.param("some", id="not-a-number")])
def test_a_bad_store_retries_setting_names_the_variable(raw):
    with pytest.raises(ConfigError, match="TRACKER_STORE_RETRIES.*whole number >= 0"):
        Settings.from_env({"TRACKER_STORE_RETRIES": raw})


# ------------------------------------------------------------------ outside transaction()


def test_a_statement_run_on_a_bare_connection_raises_the_projects_error(scratch):
    # code that uses engine.connect() itself (as the rollup lock does) meets tracker's errors too
    with scratch.connect() as conn, pytest.raises(StoreError) as raised:
        conn.exec_driver_sql("INSERT INTO scratch (k) VALUES ('a')")
        conn.exec_driver_sql("INSERT INTO scratch (k) VALUES ('a')")
    assert type(raised.value) is StoreError


def test_a_database_that_cannot_be_reached_raises_store_unavailable_on_connect(tmp_path):
    from tests.collector.server import free_port

    url = f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none"
    engine = _engine(url, retries=1)
    with pytest.raises(StoreUnavailable) as raised:
        engine.connect()
    assert type(raised.value).__module__ == "tracker.errors"
    assert "2 attempts" not in str(raised.value)  # a bare connect is not a retried unit
    with pytest.raises(StoreUnavailable, match="2 attempts"):
        in_transaction(engine, lambda conn: conn.exec_driver_sql("SELECT 1"))


@PG_ONLY
def test_an_arrow_read_on_a_terminated_connection_reads_again_on_a_new_one(engine):
    import pyarrow as pa

    from tracker.store.arrow import ArrowReader

    pid_column = pa.schema([pa.field("pid", pa.int64(), nullable=False)])
    with ArrowReader(engine) as reader:
        first = reader.read("SELECT pg_backend_pid()::int8", pid_column)["pid"][0].as_py()
        with engine.connect() as conn:  # the idle ADBC connection dies, as on a server restart
            conn.exec_driver_sql(f"SELECT pg_terminate_backend({int(first)})")
            conn.commit()
        second = reader.read("SELECT pg_backend_pid()::int8", pid_column)["pid"][0].as_py()
    assert second != first


# ------------------------------------------------------------------ the classification


@PG_ONLY
@pytest.mark.parametrize(("sqlstate", "transient"), [
    pytest.param("40001", True, id="serialization-failure-is-transient"),
    pytest.param("40P01", True, id="deadlock-is-transient"),
    pytest.param("55P03", True, id="lock-not-available-is-transient"),
    pytest.param("53300", True, id="too-many-connections-is-transient"),
    pytest.param("57P03", True, id="cannot-connect-now-is-transient"),
    pytest.param("08006", True, id="connection-failure-class-08-is-transient"),
    pytest.param("23505", False, id="unique-violation-is-not"),
    pytest.param("22012", False, id="division-by-zero-is-not"),
    pytest.param("42601", False, id="syntax-error-is-not"),
    pytest.param("57014", False, id="statement-timeout-cancel-is-not"),
])
def test_server_errors_are_classified_by_sqlstate(engine, sqlstate, transient):
    raise_it = f"DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '{sqlstate}'; END $$"
    with pytest.raises(StoreError) as raised, engine.connect() as conn:
        conn.exec_driver_sql(raise_it)
    assert isinstance(raised.value, TransientStoreError) is transient
    assert raised.value.__cause__.sqlstate == sqlstate  # the server's own error
