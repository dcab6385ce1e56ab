"""Engines, transactions and error translation: the one way code here talks to a database.

- SQLite: WAL journal, foreign keys on, a busy timeout so concurrent writers wait instead of
  failing, and pysqlite's own transaction handling replaced by explicit ``BEGIN`` (SQLAlchemy's
  documented recipe) so that write transactions can take the lock up front with
  ``BEGIN IMMEDIATE`` (no deadlock when two readers both try to upgrade).
- :func:`transaction` commits or rolls back and turns driver errors into
  :class:`~tracker.errors.StoreUnavailable` / :class:`~tracker.errors.StoreError`
  (:func:`translate`); no driver exception type leaves the store.
- Transient failures (deadlock, serialization failure, lost connection, busy SQLite:
  :func:`transient_reason`) are retried with bounded, jittered exponential backoff
  (:class:`RetryPolicy`, ``TRACKER_STORE_RETRIES``) around whole units of work that are safe
  to repeat (:func:`retried`, :func:`in_transaction`), then raised as ``StoreUnavailable``.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy import event, exc

from tracker.config import Settings, mask_password, sqlite_path
from tracker.errors import (
    SchemaOutdated,
    StoreError,
    StoreUnavailable,
    TrackerError,
    TransientStoreError,
)
from tracker.install import require

# Alembic revisions in order; the last is the one this code expects. A test checks that this
# matches the migrations' linear history and single head.
SCHEMA_HISTORY = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008",
                  "0009", "0010", "0011", "0012", "0013", "0014", "0015", "0016",
                  "0017", "0018", "0019", "0020", "0021", "0022", "0023", "0024", "0025",
                  "0026", "0027")
SCHEMA_REVISION = SCHEMA_HISTORY[-1]

_WRITE = "tracker_write"
_RETRY = "tracker_retry"
_LOG = logging.getLogger("tracker.store")
T = TypeVar("T")


def create_engine(url: str, settings: Settings | None = None, *, read_only: bool = False,
                  **kwargs) -> sa.Engine:
    """An engine for ``url`` with tracker's connection settings applied.

    ``read_only``: every transaction refuses writes (PostgreSQL ``READ ONLY`` transactions,
    SQLite ``PRAGMA query_only``), for readers such as the dashboard.
    """
    settings = settings or Settings()
    retry = {_RETRY: RetryPolicy(retries=settings.store_retries)}
    if url.startswith("sqlite"):
        engine = _sqlite_engine(url, settings, **kwargs)
        event.listen(engine, "handle_error", _translate_on_error)
        if read_only:
            @event.listens_for(engine, "connect")
            def _query_only(dbapi_connection, _record):
                dbapi_connection.execute("PRAGMA query_only=ON")
        return engine.execution_options(**retry)
    require("postgres", "a PostgreSQL database URL")
    kwargs.setdefault("pool_pre_ping", True)
    engine = sa.create_engine(url, **kwargs)
    event.listen(engine, "handle_error", _translate_on_error)
    if read_only:
        retry["postgresql_readonly"] = True
    return engine.execution_options(**retry)


def _translate_on_error(context: exc.ExceptionContext) -> StoreError | None:
    """Every driver error met by a statement or a connect on a tracker engine, wherever the
    code runs it (not only inside :func:`transaction`), raised as the project's error
    (:func:`translate`); SQLAlchemy still invalidates a lost connection. Errors that are not
    the driver's (a bug binding parameters) and the pool's liveness ping are left alone."""
    if context.is_pre_ping or not isinstance(context.original_exception,
                                             context.dialect.loaded_dbapi.Error):
        return None
    path = sqlite_path(str(context.engine.url)) if context.engine is not None else None
    if path is not None and "unable to open database file" in str(context.original_exception):
        return StoreUnavailable(f"cannot open SQLite database {path}: unable to open database "
                                f"file (can this user create files in {path.parent}?)")
    return translate(context.sqlalchemy_exception or context.original_exception)


def _sqlite_engine(url: str, settings: Settings, **kwargs) -> sa.Engine:
    path = sqlite_path(url)
    if path is not None and not path.exists():
        folder = path.parent
        if not folder.exists():
            raise StoreUnavailable(f"cannot create SQLite database {path}: folder {folder} "
                                   "does not exist")
        if not folder.is_dir():
            raise StoreUnavailable(f"cannot create SQLite database {path}: {folder} is not "
                                   "a folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise StoreUnavailable(f"cannot create SQLite database {path}: folder {folder} "
                                   "is not writable (SQLite also writes its -wal and -shm "
                                   "files there)")
    engine = sa.create_engine(url, connect_args={"timeout": settings.sqlite_busy_timeout_ms / 1000},
                              **kwargs)
    busy_ms = settings.sqlite_busy_timeout_ms

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        if path is not None:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        immediate = conn.get_execution_options().get(_WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


# SQLSTATEs after which a new attempt of the same unit of work may succeed (PostgreSQL
# Appendix A); the whole class 08 (connection exception) too.
_TRANSIENT_SQLSTATES = {
    "40001": "serialization failure",
    "40P01": "deadlock detected",
    "55P03": "lock not available",
    "53300": "too many connections",
    "57P01": "server shut down by an administrator",
    "57P02": "server crashed",
    "57P03": "server not accepting connections yet",
}
_SQLITE_BUSY = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (primary codes: extended & 0xFF)
_SQLITE_ERROR = 1  # a plain SQL error (syntax, unknown column)


def _driver_error(error: BaseException) -> BaseException:
    """The DB-API error itself: SQLAlchemy's ``orig`` when it wrapped one."""
    orig = getattr(error, "orig", None)
    return orig if isinstance(orig, BaseException) else error


def transient_reason(error: BaseException) -> str | None:
    """Why a new attempt of the unit of work that met ``error`` may succeed, or None.

    The rule: deadlocks, serialization failures, a lock or connection slot not available,
    the server shutting down or starting, every connection exception (SQLSTATE class 08), a
    connection SQLAlchemy saw die (``connection_invalidated``), an ``OperationalError`` of a
    PostgreSQL driver (psycopg, ADBC) that carries no SQLSTATE (the client library's own
    "server closed the connection" or "connection refused"), and SQLite's busy / locked.
    Anything else (a constraint, a syntax error, a missing table) fails the same way again.
    """
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return "database connection lost"
    driver = _driver_error(error)
    sqlstate = getattr(driver, "sqlstate", None)
    if sqlstate in _TRANSIENT_SQLSTATES:
        return _TRANSIENT_SQLSTATES[sqlstate]
    if isinstance(sqlstate, str) and sqlstate.startswith("08"):
        return "database connection failed"
    sqlite_code = getattr(driver, "sqlite_errorcode", None)
    if sqlite_code is not None:
        return "database is busy (another writer held it too long)" \
            if sqlite_code & 0xFF in _SQLITE_BUSY else None
    if sqlstate is None and hasattr(driver, "sqlstate") \
            and type(driver).__name__ == "OperationalError":
        return "database connection failed"
    return None


def translate(error: BaseException) -> StoreError:
    """The project's error for a driver error (SQLAlchemy's, or the DB-API driver's own when
    code used the raw connection): :class:`TransientStoreError` when a new attempt may succeed
    (:func:`transient_reason`), :class:`SchemaOutdated`, :class:`StoreUnavailable` when the
    database cannot be used, else :class:`StoreError`."""
    text = (str(_driver_error(error)).strip() or type(error).__name__).splitlines()[0]
    reason = transient_reason(error)
    if reason is not None:
        return TransientStoreError(f"{reason}: {text}")
    lowered = text.lower()
    if "no such table" in lowered or "does not exist" in lowered and "relation" in lowered:
        return SchemaOutdated(f"{text}: the database has no tracker schema; "
                              "run `tracker db upgrade`")
    if _unusable(error):
        return StoreUnavailable(f"database unavailable: {text}")
    if getattr(_driver_error(error), "sqlstate", None) == "42P01" \
            or isinstance(error, exc.ProgrammingError) and "does not exist" in text:
        return SchemaOutdated(f"{text}: the database schema is behind; run `tracker db upgrade`")
    if isinstance(error, exc.InterfaceError):
        return StoreUnavailable(f"database unavailable: {text}")
    return StoreError(f"database error: {text}")


def _unusable(error: BaseException) -> bool:
    """The database cannot be used (cannot open, I/O error, full, read-only, wrong password):
    the driver's ``OperationalError``, except SQLite's plain SQL errors (a syntax error is an
    ``OperationalError`` in ``sqlite3`` too) and PostgreSQL's program limits (SQLSTATE class
    54, e.g. a value too large for an index entry: that statement fails, the database
    serves the others)."""
    driver = _driver_error(error)
    if not (isinstance(error, exc.OperationalError)
            or type(driver).__name__ == "OperationalError"):
        return False
    if str(getattr(driver, "sqlstate", None) or "").startswith("54"):
        return False
    sqlite_code = getattr(driver, "sqlite_errorcode", None)
    return sqlite_code is None or sqlite_code & 0xFF != _SQLITE_ERROR


@dataclass(frozen=True)
class RetryPolicy:
    """How a unit of work meets a transient failure: up to ``retries`` new attempts, the n-th
    (from 0) after a random pause drawn from [0, min(max_delay, base_delay * 2**n)] seconds.

    That is "full jitter" (M. Brooker, "Exponential Backoff And Jitter", AWS Architecture
    Blog, 2015): writers that failed together (the two sides of a deadlock) do not come back
    together. A plain loop rather than a retry library: the store imports only SQLAlchemy, and
    the substance here is the classification (:func:`transient_reason`), not the loop.
    """

    retries: int = 4
    base_delay: float = 0.05
    max_delay: float = 2.0

    def pauses(self) -> Iterator[float]:
        """The pause before each new attempt, in order."""
        for n in range(self.retries):
            yield random.uniform(0.0, min(self.max_delay, self.base_delay * 2 ** n))


def retry_policy(engine: sa.Engine) -> RetryPolicy:
    """The policy :func:`create_engine` attached to ``engine`` (the default one otherwise)."""
    return engine.get_execution_options().get(_RETRY, None) or RetryPolicy()


@contextmanager
def translated(engine: sa.Engine) -> Iterator[None]:
    """Driver errors raised inside become the project's (:func:`translate`); tracker's own
    errors and everything else pass unchanged."""
    try:
        yield
    except TrackerError:
        raise
    except (exc.SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as error:
        raise translate(error) from error


def retried(engine: sa.Engine, work: Callable[[], T]) -> T:
    """``work()`` until it succeeds, a new attempt after each transient failure, within the
    engine's :class:`RetryPolicy`; then :class:`StoreUnavailable` saying so.

    ``work`` is a whole unit of work (one or more transactions of its own, committed or rolled
    back inside it) that is safe to repeat: what it reports must come from its last attempt.
    Errors that are not transient are raised at once, translated.
    """
    pauses = retry_policy(engine).pauses()
    attempt = 1
    while True:
        try:
            with translated(engine):
                return work()
        except TransientStoreError as error:
            pause = next(pauses, None)
            if pause is None:
                raise StoreUnavailable(f"{error} (still failing after {attempt} attempt"
                                       f"{'s' if attempt > 1 else ''}; retry later)") from error
            _LOG.info("store: %s; attempt %d in %.3f s", error, attempt + 1, pause)
            time.sleep(pause)
            attempt += 1


def in_transaction(engine: sa.Engine, work: Callable[[sa.Connection], T], *,
                   write: bool = False) -> T:
    """``work(conn)`` in one transaction (see :func:`transaction`), run again in a new one after
    a transient failure (see :func:`retried`); ``work`` must be safe to repeat."""
    def attempt() -> T:
        with transaction(engine, write=write) as conn:
            return work(conn)

    return retried(engine, attempt)


@contextmanager
def transaction(engine: sa.Engine, *, write: bool = False) -> Iterator[sa.Connection]:
    """One transaction: commit on success, roll back on any error.

    ``write=True`` takes SQLite's write lock at BEGIN (``BEGIN IMMEDIATE``); PostgreSQL is
    unaffected. Getting the connection and beginning are retried on transient failures (no
    statement of the caller has run yet); the body runs once (a ``with`` block cannot be run
    again: use :func:`in_transaction` or :func:`retried` for units of work to retry). Driver
    errors leave as :class:`StoreError` subclasses (:func:`translate`), tracker's own errors
    unchanged; a failing rollback never hides the error that caused it.
    """
    conn = retried(engine, lambda: _begin(engine, write))
    try:
        with translated(engine):
            try:
                yield conn
            except BaseException:
                _roll_back(conn)
                raise
            conn.commit()
    finally:
        conn.close()


def _begin(engine: sa.Engine, write: bool) -> sa.Connection:
    conn = engine.connect()
    try:
        if write:
            conn.execution_options(**{_WRITE: True})
        conn.begin()
    except BaseException:
        conn.close()
        raise
    return conn


def _roll_back(conn: sa.Connection) -> None:
    """Roll back after an error; when that fails too (the connection is gone) the connection
    is discarded, and the first error is the one raised."""
    try:
        conn.rollback()
    except Exception:
        conn.invalidate()


def binary_rows(conn: sa.Connection, statement: sa.Select) -> list[tuple]:
    """The rows of ``statement`` as tuples of the driver's values, in ``conn``'s
    transaction. On PostgreSQL in the binary result format: a ``bytea`` column then arrives
    as its bytes, where the text format sends it hex-escaped (twice the size) for the
    client to decode; a provisional day's 64 MB of stored state (1M impressions) read in
    0.07-0.08 s against 0.22-0.29 s. For the rollup's stored state, whose reads return
    integers, dates and bytes (the same values either way)."""
    if conn.dialect.name != "postgresql":
        return [tuple(row) for row in conn.execute(statement)]
    compiled = statement.compile(dialect=conn.dialect,
                                 compile_kwargs={"render_postcompile": True})
    with conn.connection.driver_connection.cursor(binary=True) as cursor:
        cursor.execute(compiled.string, compiled.params)
        return cursor.fetchall()


def schema_revision(conn: sa.Connection) -> str | None:
    """The Alembic revision the database is at, or None when it has no tracker schema."""
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def require_current_schema(engine: sa.Engine) -> None:
    """Refuse to work on a database whose schema is missing or behind this code."""
    with transaction(engine) as conn:
        revision = schema_revision(conn)
    if revision == SCHEMA_REVISION:
        return
    where = mask_password(engine.url.render_as_string(hide_password=False))
    if revision is None:
        raise SchemaOutdated(f"database {where} has no tracker schema yet: "
                             "run `tracker db upgrade` to create it")
    if revision not in SCHEMA_HISTORY:
        raise SchemaOutdated(f"database {where} is at schema revision {revision}, newer than "
                             f"this tracker knows ({SCHEMA_REVISION}): upgrade the tracker package")
    raise SchemaOutdated(f"database {where} is at schema revision {revision}, this tracker "
                         f"needs {SCHEMA_REVISION}: run `tracker db upgrade`")
