"""Migrations: the only way the schema changes, and they agree with the models."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from tests.helpers import T0, count, insert_plain_experiment, make_experiment
from tracker import Tracker, install
from tracker.errors import SchemaOutdated
from tracker.store import schema
from tracker.store.db import SCHEMA_HISTORY, SCHEMA_REVISION, create_engine
from tracker.store.tables import metadata

VERSIONS = install.shipped(install.MIGRATIONS) / "versions"


def test_models_equal_the_migrated_schema(engine):
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, metadata) == []


def test_one_linear_history_whose_head_the_code_expects():
    scripts = ScriptDirectory.from_config(schema.alembic_config())
    assert scripts.get_heads() == [SCHEMA_REVISION]
    walked = [s.revision for s in scripts.walk_revisions("base", "heads")]
    assert list(reversed(walked)) == list(SCHEMA_HISTORY)
    for script in scripts.walk_revisions():
        assert not script.is_branch_point and not script.is_merge_point


@pytest.mark.parametrize("path", sorted(VERSIONS.glob("*.py")), ids=lambda p: p.name)
def test_migration_does_not_import_the_orm_models(path: Path):
    tree = ast.parse(path.read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name.startswith("tracker")], imported


@pytest.mark.parametrize("path", sorted(VERSIONS.glob("*.py")), ids=lambda p: p.name)
def test_every_revision_has_a_real_downgrade(path: Path):
    tree = ast.parse(path.read_text())
    downgrade = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                     and n.name == "downgrade")
    calls = [n for n in ast.walk(downgrade) if isinstance(n, ast.Call)]
    # a data-only upgrade may leave nothing to undo, and then says why
    reason = ast.get_docstring(downgrade) or ""
    assert calls or reason.startswith("Nothing to undo: "), \
        f"{path.name}: downgrade() does nothing and does not say why"


def test_upgrade_downgrade_upgrade_round_trips(empty_url):
    engine = create_engine(empty_url)
    assert schema.upgrade(engine) == SCHEMA_REVISION
    assert schema.downgrade(engine, "base") is None
    with engine.connect() as conn:
        assert set(sa.inspect(conn).get_table_names()) <= {"alembic_version"}
    assert schema.upgrade(engine) == SCHEMA_REVISION
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, metadata) == []
    engine.dispose()


def test_data_survives_upgrading_through_every_revision(empty_url):
    engine = create_engine(empty_url)
    schema.upgrade(engine, SCHEMA_HISTORY[0])
    # write with plain SQL at the first revision: the code may expect a later schema
    with engine.begin() as conn:
        insert_plain_experiment(conn, 1, arms=True)
    for revision in SCHEMA_HISTORY[1:]:
        schema.upgrade(engine, revision)
    assert schema.upgrade(engine) == SCHEMA_REVISION
    with Tracker(empty_url) as t:
        survived = t.experiment("old")
        assert [a.key for a in survived.arms] == ["a", "b"]
        t.log_impression(experiment="old", arm="b", user_id="u", items=["x"], served_at=T0,
                         impression_id="after-upgrade")
    assert count(engine, "impression") == 1
    engine.dispose()


def test_library_refuses_a_database_without_schema(empty_url):
    with pytest.raises(SchemaOutdated, match="tracker db upgrade"):
        Tracker(empty_url)


def test_library_refuses_a_database_whose_schema_is_behind(db_url, monkeypatch):
    # stand for a newer tracker release: one more revision than the database has
    import tracker.store.db as db

    monkeypatch.setattr(db, "SCHEMA_HISTORY", (*SCHEMA_HISTORY, "next"))
    monkeypatch.setattr(db, "SCHEMA_REVISION", "next")
    with pytest.raises(SchemaOutdated, match=f"at schema revision {SCHEMA_REVISION}, this "
                                             "tracker needs next: run `tracker db upgrade`"):
        Tracker(db_url)


def test_library_refuses_a_database_newer_than_itself(db_url):
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(SchemaOutdated, match="upgrade the tracker package"):
        Tracker(db_url)
    engine.dispose()


def test_sqlite_default_uses_wal_and_foreign_keys(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
    engine.dispose()


def test_deleting_an_experiment_cascades_to_its_arms(tracker):
    make_experiment(tracker)
    assert count(tracker.engine, "arm") == 2
    with tracker.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM experiment"))
    assert count(tracker.engine, "arm") == 0


# ---------------------------------------------------------------------------- downgrade safety
def _tables(engine) -> set[str]:
    with engine.connect() as conn:
        return set(sa.inspect(conn).get_table_names()) - {"alembic_version"}


@pytest.mark.parametrize(("revision", "drops"), [
    pytest.param("base", True, id="down-to-base-drops-every-table"),
    pytest.param("-1", False, id="one-step-down-past-0027-drops-no-table"),
    pytest.param("0024", True, id="down-past-0025-drops-the-slice-counts"),
    # 0021's checkpoint tables go back into rollup_units: dropped, their rows kept there
    pytest.param("0020", True, id="down-past-0021-drops-the-checkpoint-tables"),
    pytest.param("0017", True, id="down-past-0018-drops-0021s-tables-only"),
    pytest.param("0016", True, id="down-past-0017-drops-the-plan-history-and-summaries"),
    pytest.param("0015", True, id="down-past-0016-drops-its-key-scope-table"),
    pytest.param("0013", True, id="down-past-0014-drops-the-provisional-state-table"),
    pytest.param("0012", True, id="down-past-0013-drops-0014s-table-and-0013s-index-only"),
    pytest.param("0011", True, id="down-past-0012-drops-the-exposure-day-tables"),
    pytest.param("0010", True, id="down-past-0011-drops-the-cuped-covariate-tables"),
    pytest.param("0008", True, id="down-past-0009-drops-the-log-expiry-table"),
    pytest.param("0004", True, id="down-past-the-catalog-revision-drops-its-table"),
    pytest.param(SCHEMA_HISTORY[1], True, id="down-to-a-named-revision"),
])
def test_tables_dropped_by_a_downgrade_are_predicted_exactly_and_nothing_changes(
        tracker, db_url, revision, drops):
    make_experiment(tracker)
    engine = create_engine(db_url)
    tables = _tables(engine)
    predicted = schema.tables_dropped_by(engine, revision)
    assert schema.current(engine) == SCHEMA_REVISION and _tables(engine) == tables
    assert count(engine, "arm") == 2  # the dry run rolled back
    counts = {t.table: t.rows for t in predicted}
    if "arm" in counts:
        assert (counts["experiment"], counts["arm"]) == (1, 2)
    schema.downgrade(engine, revision)
    assert set(counts) == tables - _tables(engine)
    assert bool(counts) == drops
    engine.dispose()


@pytest.mark.parametrize("revision", ["0023", "0010", "0006"])
def test_a_downgrade_that_drops_a_column_of_experiment_keeps_its_arms(tracker, db_url, revision):
    # 0024 (segments), 0011 (cuped_days) and 0007 (roles) drop a column of ``experiment``: a
    # table copy on SQLite would delete the arms through their ON DELETE CASCADE foreign key
    make_experiment(tracker)
    engine = create_engine(db_url)
    schema.downgrade(engine, revision)
    assert count(engine, "experiment") == 1 and count(engine, "arm") == 2
    engine.dispose()


@pytest.mark.parametrize("revision", [
    pytest.param("0008", id="to-0008-would-forget-the-horizon"),
    pytest.param("0005", id="further-down-but-keeping-the-results-too"),
])
def test_a_downgrade_that_would_forget_the_retention_horizon_is_refused(tracker, db_url,
                                                                       revision):
    from tests.rollup.scenario import make_logs
    from tracker.errors import ExpiredLogs

    make_experiment(tracker)
    imps, events = make_logs(3, days=3, key="home")
    tracker.log_impressions(imps)
    tracker.log_interactions(events)
    now = datetime(2026, 11, 20, tzinfo=UTC)
    tracker.rollup(now=now)
    tracker.expire_logs(now - (T0 + timedelta(days=1)), now=now)
    engine = create_engine(db_url)
    tables = _tables(engine)
    with pytest.raises(ExpiredLogs, match="log_expiry"):
        schema.downgrade(engine, revision)
    assert schema.current(engine) == SCHEMA_REVISION and _tables(engine) == tables
    refused = _downgrade(db_url, "--revision", revision, "--yes")
    assert refused.exit_code != 0 and "Traceback" not in refused.output, refused.output
    assert "log_expiry" in refused.output and schema.current(engine) == SCHEMA_REVISION
    # down past 0003 the results go too: nothing is left to recompute wrongly
    schema.downgrade(engine, "0002")
    assert "log_expiry" not in _tables(engine) and "rollup_day" not in _tables(engine)
    engine.dispose()


def _downgrade(url: str, *args: str):
    from click.testing import CliRunner

    from tracker.cli import main

    return CliRunner().invoke(main, ["db", "downgrade", *args],
                              env={"TRACKER_DATABASE_URL": url})


def test_cli_downgrade_without_a_terminal_refuses_to_drop_rows_and_names_them(tracker, db_url):
    make_experiment(tracker)
    refused = _downgrade(db_url, "--revision", "base")
    assert refused.exit_code == 2, refused.output
    assert "experiment (1 row)" in refused.output and "arm (2 rows)" in refused.output
    assert "--yes" in refused.output
    engine = create_engine(db_url)
    assert schema.current(engine) == SCHEMA_REVISION and count(engine, "arm") == 2
    dropped = _downgrade(db_url, "--revision", "base", "--yes")
    assert dropped.exit_code == 0, dropped.output
    assert schema.current(engine) is None and _tables(engine) == set()
    engine.dispose()


def test_cli_downgrade_of_empty_tables_asks_nothing(db_url):
    result = _downgrade(db_url, "--revision", "base")
    assert result.exit_code == 0, result.output
    assert "-> empty" in result.output


@pytest.mark.parametrize("revision", [
    pytest.param("zzz", id="unknown-revision"),
    pytest.param("-99", id="more-steps-down-than-the-history-holds"),
])
def test_cli_downgrade_to_a_bad_revision_is_a_usage_error(db_url, revision):
    result = _downgrade(db_url, "--revision", revision)
    assert result.exit_code == 2, result.output
    assert "expected 'head', 'base'" in result.output and "Traceback" not in result.output


def _answer_in_a_terminal(url: str, answer: bytes) -> tuple[int, str]:
    """Run `tracker db downgrade --revision base` on a pseudo-terminal, answer its question."""
    import os
    import pty
    import subprocess
    import sys
    import time

    leader, follower = pty.openpty()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TRACKER_DATABASE_URL": url,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root),
                                                       os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen([sys.executable, "-m", "tracker.cli", "db", "downgrade",
                                "--revision", "base"], stdin=follower, stdout=follower,
                               stderr=follower, env=env, cwd=root)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 60
    while b"[y/N]" not in seen and time.monotonic() < deadline:
        try:
            seen += os.read(leader, 4096)
        except OSError:
            break
    os.write(leader, answer)
    code = process.wait(60)
    try:
        while chunk := os.read(leader, 4096):
            seen += chunk
    except OSError:
        pass
    os.close(leader)
    return code, seen.decode(errors="replace")


@pytest.mark.parametrize(("answer", "kept"), [
    pytest.param(b"n\n", True, id="no-keeps-every-table"),
    pytest.param(b"y\n", False, id="yes-drops-them"),
])
def test_cli_downgrade_in_a_terminal_asks_naming_tables_and_rows(tracker, db_url, answer, kept):
    make_experiment(tracker)
    tracker.close()
    code, shown = _answer_in_a_terminal(db_url, answer)
    assert "drops tables holding rows" in shown and "arm (2 rows)" in shown, shown
    engine = create_engine(db_url)
    assert (code, schema.current(engine) == SCHEMA_REVISION) == ((1, True) if kept else
                                                                (0, False)), shown
    engine.dispose()


def _storage(engine, table: str) -> tuple[str, str]:
    """PostgreSQL's storage and compression of ``table.data`` (``attstorage``,
    ``attcompression``: '' is the server's default)."""
    with engine.connect() as conn:
        return tuple(conn.execute(sa.text(
            "SELECT attstorage, attcompression FROM pg_attribute WHERE attname = 'data' "
            "AND attrelid = CAST(:table AS regclass)"), {"table": table}).one())


def test_0015_stores_the_provisional_state_uncompressed_and_the_rest_with_lz4(db_url):
    engine = create_engine(db_url)
    if engine.dialect.name != "postgresql":  # no such setting: the round trip only
        schema.downgrade(engine, "0014")
        assert schema.upgrade(engine) == SCHEMA_REVISION
        return
    with engine.connect() as conn:
        lz4 = "lz4" in conn.execute(sa.text(
            "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"
        )).scalar()
    assert not sa.inspect(engine).has_table("rollup_provisional")  # 0023 drops it
    schema.downgrade(engine, "0022")  # and gives it back, empty, stored as 0015 did
    assert _storage(engine, "rollup_provisional") == ("e", "")
    schema.downgrade(engine, "0017")  # 0018 drops rollup_pairs; its downgrade restores it
    assert _storage(engine, "rollup_pairs") == ("x", "l" if lz4 else "")
    assert _storage(engine, "rollup_units") == ("e", "")  # since 0004
    schema.downgrade(engine, "0014")
    assert _storage(engine, "rollup_provisional") == ("x", "")
    assert _storage(engine, "rollup_pairs") == ("x", "")
    engine.dispose()


def test_0023_drops_the_provisional_state_and_its_downgrade_gives_the_table_back_empty(
        tracker, db_url):
    """Upgrade drops ``rollup_provisional`` (derived data: a day without a row is read
    from the logs); the downgrade creates it again, empty, with its key, so the release
    before runs on it; nothing else changes either way."""
    make_experiment(tracker)
    engine = create_engine(db_url)
    assert not sa.inspect(engine).has_table("rollup_provisional")
    schema.downgrade(engine, "0022")
    inspector = sa.inspect(engine)
    assert inspector.get_pk_constraint("rollup_provisional")["constrained_columns"] == \
        ["experiment_id", "day", "part"]
    assert count(engine, "rollup_provisional") == 0
    assert count(engine, "experiment") == 1
    assert schema.upgrade(engine) == SCHEMA_REVISION
    assert not sa.inspect(engine).has_table("rollup_provisional")
    assert count(engine, "experiment") == 1
    engine.dispose()
