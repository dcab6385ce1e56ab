"""Engines, transactions and error translation: the one way code here talks to a database.

- SQLite: WAL journal, foreign keys on, a busy timeout so concurrent writers wait instead of
  failing, and pysqlite's own transaction handling replaced by explicit ``BEGIN`` (SQLAlchemy's
  documented recipe) so that write transactions can take the lock up front with
  ``BEGIN IMMEDIATE`` (no deadlock when two readers both try to upgrade).
- :func:`transaction` commits or rolls back and turns driver errors into
  :class:`~tracker.errors.StoreUnavailable` / :class:`~tracker.errors.StoreError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy import event, exc

from tracker.config import Settings, sqlite_path
from tracker.errors import SchemaOutdated, StoreError, StoreUnavailable, TrackerError

# Alembic revisions in order; the last is the one this code expects. A test checks that this
# matches the migrations' linear history and single head.
SCHEMA_HISTORY = ("0001", "0002", "0003", "0004", "0005", "0007")
SCHEMA_REVISION = SCHEMA_HISTORY[-1]

_WRITE = "tracker_write"


def create_engine(url: str, settings: Settings | None = None, *, read_only: bool = False,
                  **kwargs) -> sa.Engine:
    """An engine for ``url`` with tracker's connection settings applied.

    ``read_only``: every transaction refuses writes (PostgreSQL ``READ ONLY`` transactions,
    SQLite ``PRAGMA query_only``), for readers such as the dashboard.
    """
    settings = settings or Settings()
    if url.startswith("sqlite"):
        engine = _sqlite_engine(url, settings, **kwargs)
        if read_only:
            @event.listens_for(engine, "connect")
            def _query_only(dbapi_connection, _record):
                dbapi_connection.execute("PRAGMA query_only=ON")
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    engine = sa.create_engine(url, **kwargs)
    return engine.execution_options(postgresql_readonly=True) if read_only else engine


def _sqlite_engine(url: str, settings: Settings, **kwargs) -> sa.Engine:
    path = sqlite_path(url)
    if path is not None and not path.parent.exists():
        raise StoreUnavailable(f"cannot create SQLite database {path}: folder {path.parent} "
                               "does not exist")
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


def translate(error: exc.DBAPIError | exc.SQLAlchemyError) -> StoreError:
    """The project's error for a driver error: unavailable (retry later) or refused."""
    text = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return StoreUnavailable(f"database connection lost: {text}")
    if isinstance(error, exc.OperationalError):
        lowered = text.lower()
        if "locked" in lowered or "busy" in lowered:
            return StoreUnavailable(f"database is busy (another writer held it too long): {text}")
        if "no such table" in lowered or "does not exist" in lowered and "relation" in lowered:
            return SchemaOutdated(f"{text}: the database has no tracker schema; "
                                  "run `tracker db upgrade`")
        return StoreUnavailable(f"database unavailable: {text}")
    if isinstance(error, exc.ProgrammingError) and "does not exist" in text:
        return SchemaOutdated(f"{text}: the database schema is behind; run `tracker db upgrade`")
    if isinstance(error, exc.InterfaceError):
        return StoreUnavailable(f"database unavailable: {text}")
    return StoreError(f"database error: {text}")


@contextmanager
def transaction(engine: sa.Engine, *, write: bool = False) -> Iterator[sa.Connection]:
    """One transaction: commit on success, roll back on any error.

    ``write=True`` takes SQLite's write lock at BEGIN (``BEGIN IMMEDIATE``); PostgreSQL is
    unaffected. Driver errors leave as :class:`StoreError` subclasses; tracker's own errors
    pass through unchanged.
    """
    try:
        with engine.connect() as conn:
            if write:
                conn = conn.execution_options(**{_WRITE: True})
            with conn.begin():
                yield conn
    except TrackerError:
        raise
    except exc.SQLAlchemyError as error:
        raise translate(error) from error


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
    where = engine.url.render_as_string(hide_password=True)
    if revision is None:
        raise SchemaOutdated(f"database {where} has no tracker schema yet: "
                             "run `tracker db upgrade` to create it")
    if revision not in SCHEMA_HISTORY:
        raise SchemaOutdated(f"database {where} is at schema revision {revision}, newer than "
                             f"this tracker knows ({SCHEMA_REVISION}): upgrade the tracker package")
    raise SchemaOutdated(f"database {where} is at schema revision {revision}, this tracker "
                         f"needs {SCHEMA_REVISION}: run `tracker db upgrade`")
