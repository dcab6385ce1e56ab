"""One database fixture, two backends.

SQLite in a temporary folder by default; the real PostgreSQL when
``TRACKER_TEST_DATABASE_URL`` is set (each test gets its own PostgreSQL schema, dropped
afterwards, so tests never see each other's rows). No mocked database anywhere.

Tests whose outcome can depend on that backend carry the ``store`` marker, so a second run on
PostgreSQL takes only them (``pytest -m store``; ``.ci/test`` runs both passes). It is applied
here, never by hand-kept lists: to every test that uses a database fixture (``empty_url`` and
everything built on it) and to every test of a module that imports from this one (it reaches
the backend through ``fresh_database``/``migrated`` or branches on ``BACKEND``/``PG_URL``).
A test that opens the backend under test some other way is caught at run time: unmarked, it
fails and says to add ``pytest.mark.store``.
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


# The fixtures that give a test the backend under test; fixtures built on them (a test's
# fixture closure holds every fixture it uses, directly or not) count too.
STORE_FIXTURES = frozenset({"empty_url", "db_url", "settings", "tracker", "engine"})
_opened = 0  # databases fresh_database has opened, for the run-time check of the marker
_OPENED_BEFORE = pytest.StashKey[int]()  # _opened when a test's setup began


def pytest_report_header(config):
    return f"tracker test database: {BACKEND}" + (f" ({PG_URL})" if PG_URL else "")


def _imports_conftest(module_path: Path, cache: dict[Path, bool]) -> bool:
    if module_path not in cache:
        text = module_path.read_text(encoding="utf-8") if module_path.suffix == ".py" else ""
        cache[module_path] = "tests.conftest" in text
    return cache[module_path]


def pytest_collection_modifyitems(config, items):
    cache: dict[Path, bool] = {}
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & STORE_FIXTURES or _imports_conftest(Path(item.path), cache):
            item.add_marker(pytest.mark.store)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_OPENED_BEFORE] = _opened


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if (call.when == "teardown" and report.passed and item.get_closest_marker("store") is None
            and _opened != item.stash.get(_OPENED_BEFORE, _opened)):
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} opened the database under test (fresh_database) "
                           "without the store marker, so the PostgreSQL pass (-m store) would "
                           "skip it: use a database fixture or add pytest.mark.store")
    return report


@contextmanager
def fresh_database(folder: Path) -> Iterator[str]:
    """An empty database of the backend under test (a SQLite file in ``folder``, or a new
    PostgreSQL schema dropped afterwards); for tests that need several, e.g. one per
    Hypothesis example."""
    global _opened
    _opened += 1
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
