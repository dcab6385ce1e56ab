"""Extras: the core works without any, and a command whose extra is missing names it.

A missing module is simulated in a subprocess by ``sys.modules[name] = None`` (Python then
refuses to import it, as if it were not installed), never by uninstalling anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import BACKEND
from tracker.errors import TrackerError
from tracker.install import DASHBOARD, DISTRIBUTION, EXTRAS, MIGRATIONS, Shipped, shipped

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# Everything the extras bring, their own dependencies included.
EXTRA_MODULES = ("fastapi", "starlette", "pydantic", "uvicorn", "prometheus_client",
                 "streamlit", "altair", "psycopg", "adbc_driver_postgresql",
                 "adbc_driver_manager", "pyspark", "py4j")


def tracker_without(modules: tuple[str, ...], code: str, cwd: Path,
                    env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter in which ``modules`` cannot be imported."""
    blocked = f"import sys; sys.modules.update(dict.fromkeys({list(modules)!r}))\n"
    outer = {name: value for name, value in os.environ.items() if not name.startswith("TRACKER_")}
    environment = {**outer, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-c", blocked + code], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=120)


def cli(*args: str) -> str:
    return f"from tracker.cli import main\nmain({list(args)!r}, prog_name='tracker')"


@pytest.mark.skipif(BACKEND != "sqlite", reason="a SQLite file in a temporary folder: once")
def test_the_core_logs_rolls_up_and_reports_without_any_extra(tmp_path):
    code = ("import tracker.client, tracker.sdk, tracker.report\n"
            "from tracker.cli import main\n"
            "try:\n"
            "    main(['demo', '--days', '1', '--users', '60'], prog_name='tracker')\n"
            "except SystemExit as done:\n"
            "    assert done.code in (0, None), done.code\n"
            f"print(sorted(m for m in {EXTRA_MODULES!r} if sys.modules.get(m)))\n")
    done = tracker_without(EXTRA_MODULES, code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "[]"
    assert (tmp_path / "tracker.db").is_file()


MISSING = [
    pytest.param(("fastapi",), ["serve"], {},
                 "tracker serve needs the server extra (fastapi not installed): "
                 "pip install 'recsys-tracker[server]'", id="serve-without-fastapi-names-server"),
    pytest.param(("uvicorn",), ["serve"], {},
                 "tracker serve needs the server extra (uvicorn not installed): "
                 "pip install 'recsys-tracker[server]'", id="serve-without-uvicorn-names-server"),
    pytest.param(("prometheus_client",), ["serve"], {},
                 "tracker serve needs the server extra (prometheus_client not installed): "
                 "pip install 'recsys-tracker[server]'",
                 id="serve-without-prometheus-client-names-server"),
    pytest.param(("streamlit",), ["dashboard"], {},
                 "tracker dashboard needs the dashboard extra (streamlit not installed): "
                 "pip install 'recsys-tracker[dashboard]'",
                 id="dashboard-without-streamlit-names-dashboard"),
    pytest.param(("fastapi",), None, {},
                 "tracker.collector needs the server extra (fastapi not installed): "
                 "pip install 'recsys-tracker[server]'",
                 id="importing-the-collector-without-fastapi-names-server"),
    pytest.param(("psycopg", "adbc_driver_postgresql"), ["db", "current"],
                 {"TRACKER_DATABASE_URL": "postgresql+psycopg://tracker@127.0.0.1:1/tracker"},
                 "a PostgreSQL database URL needs the postgres extra (psycopg, "
                 "adbc_driver_postgresql not installed): pip install 'recsys-tracker[postgres]'",
                 id="postgresql-url-without-psycopg-names-postgres"),
]


@pytest.mark.skipif(BACKEND != "sqlite", reason="no database is reached: once")
@pytest.mark.parametrize(("blocked", "args", "env", "message"), MISSING)
def test_a_command_whose_extra_is_missing_says_which_to_install(tmp_path, blocked, args, env,
                                                                message):
    if args is None:  # a library import, not a command: the error itself
        done = tracker_without(blocked, "import tracker.collector", tmp_path, env)
        assert done.stderr.strip().splitlines()[-1] == f"tracker.errors.MissingExtra: {message}"
        return
    done = tracker_without(blocked, cli(*args), tmp_path, env)
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == f"Error: {message}"
    assert "Traceback" not in done.stderr


def test_every_extra_the_code_checks_is_declared_with_its_distribution_name():
    extras = PYPROJECT["optional-dependencies"]
    assert PYPROJECT["name"] == DISTRIBUTION
    assert set(EXTRAS) | {"all", "dev", "docs"} == set(extras)  # docs: the site, a tool
    assert extras["all"] == [f"{DISTRIBUTION}[{','.join(EXTRAS)}]"]
    assert f"{DISTRIBUTION}[all,docs]" in extras["dev"]  # .ci/run's `pip install -e '.[dev]'`


def distributions(requirements: list[str]) -> set[str]:
    return {Requirement(text).name.lower() for text in requirements}


def test_no_extra_is_a_core_dependency():
    core = distributions(PYPROJECT["dependencies"])
    for extra in EXTRAS:
        wanted = distributions(PYPROJECT["optional-dependencies"][extra])
        assert wanted and not wanted & core, (extra, wanted & core)


@pytest.mark.parametrize("what", [MIGRATIONS, DASHBOARD], ids=["migrations", "dashboard"])
def test_a_source_checkout_finds_its_own_top_level_folders(what):
    assert shipped(what) == ROOT / what.folder


def test_a_folder_in_neither_place_says_where_it_looked_and_what_to_do():
    missing = Shipped("nowhere", "_nowhere", "marker.txt")
    with pytest.raises(TrackerError) as raised:
        shipped(missing)
    message = str(raised.value)
    assert all(str(path) in message for path in missing.candidates())
    assert message.startswith("nowhere/ not found") and "reinstall recsys-tracker" in message


@pytest.mark.skipif(BACKEND != "sqlite", reason="no database is reached: once")
def test_importing_tracker_spark_without_pyspark_names_the_spark_extra(tmp_path):
    done = tracker_without(("pyspark",), "import tracker.spark", tmp_path)
    assert done.stderr.strip().splitlines()[-1] == (
        "tracker.errors.MissingExtra: tracker.spark needs the spark extra (pyspark not "
        "installed): pip install 'recsys-tracker[spark]'")
