"""One database fixture, two backends.

SQLite in a temporary folder by default; the real PostgreSQL when
``TRACKER_TEST_DATABASE_URL`` is set (each test gets its own PostgreSQL schema, dropped
afterwards, so tests never see each other's rows). No mocked database anywhere.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
import sqlalchemy as sa

from tracker.config import Settings
from tracker.store import schema
from tracker.store.db import create_engine

PG_URL = os.environ.get("TRACKER_TEST_DATABASE_URL")
BACKEND = "postgresql" if PG_URL else "sqlite"


def pytest_report_header(config):
    return f"tracker test database: {BACKEND}" + (f" ({PG_URL})" if PG_URL else "")


@contextmanager
def fresh_database(folder: Path) -> Iterator[str]:
    """An empty database of the backend under test (a SQLite file in ``folder``, or a new
    PostgreSQL schema dropped afterwards); for tests that need several, e.g. one per
    Hypothesis example."""
    if not PG_URL:
        yield f"sqlite:///{folder / f'tracker-{uuid.uuid4().hex[:8]}.db'}"
        return
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options={quote(f'-csearch_path={name}')}"
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {name} CASCADE")
        admin.dispose()


def migrated(url: str) -> str:
    engine = create_engine(url)
    schema.upgrade(engine)
    engine.dispose()
    return url


@pytest.fixture
def empty_url(tmp_path) -> Iterator[str]:
    """The URL of an empty database (no tables) of the backend under test."""
    with fresh_database(tmp_path) as url:
        yield url


@pytest.fixture
def db_url(empty_url) -> str:
    """The URL of a database migrated to the current schema."""
    return migrated(empty_url)


@pytest.fixture
def settings(db_url) -> Settings:
    return Settings(database_url=db_url)


@pytest.fixture
def tracker(settings):
    from tracker import Tracker

    with Tracker(settings=settings) as t:
        yield t


@pytest.fixture
def engine(db_url) -> Iterator[sa.Engine]:
    engine = create_engine(db_url)
    yield engine
    engine.dispose()
