"""The built wheel works on its own: no source tree, any folder.

Builds the wheel from a clean copy of the files the build reads, installs it with
``--no-deps`` into a fresh virtualenv whose dependencies resolve through a ``.pth`` line to this
interpreter's site-packages (nothing is downloaded), then, from an empty folder and without
``PYTHONPATH``, migrates a SQLite database, runs the demo and serves the dashboard until its
health endpoint answers. It touches only SQLite in a temporary folder, so it runs once: in the
SQLite run of the suite, not again in the PostgreSQL one.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.conftest import BACKEND
from tests.dashboard.browser import free_port, wait_for_http
from tracker import __version__
from tracker.install import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[1]
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "tracker", "migrations",
                "dashboard")

# Every page of the installed dashboard under Streamlit's AppTest: the pages `import dashboard`
# from the wheel's copy and read the demo's experiment.
PAGES_RUN = """
import re
from streamlit.testing.v1 import AppTest
from tracker.install import DASHBOARD, shipped

at = AppTest.from_file(str(shipped(DASHBOARD) / "app.py"), default_timeout=60).run()
for page in ("views/experiments.py", "views/experiment.py", "views/glossary.py"):
    at.switch_page(page).run()
    assert not at.exception and not at.error, (page, at.exception, at.error)
    # an experiment's name is stored text: an escaped <h1> block, not st.title (issue 29)
    heading = at.title[0].value if at.title else next(
        m.value for m in at.markdown if m.value.startswith("<h1>"))
    print(page, re.sub("<[^>]+>", "", heading))
"""

pytestmark = pytest.mark.skipif(BACKEND != "sqlite", reason="touches only SQLite in a temporary "
                                "folder: runs once, in the SQLite run")


def build_wheel(into: Path) -> Path:
    """The wheel built offline (``--no-build-isolation``: this environment's setuptools) from a
    copy of the sources, so the checkout gets no ``build/`` folder whose stale files could leak
    into a later wheel."""
    source = into / "source"
    source.mkdir(parents=True)
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, source / name)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--wheel-dir", str(into / "dist"), str(source)], cwd=into)
    (wheel,) = (into / "dist").glob("*.whl")
    return wheel


def install_in_fresh_venv(wheel: Path, folder: Path) -> Path:
    """A new virtualenv holding only the wheel; a ``.pth`` line makes this interpreter's
    site-packages (the dependencies) importable after the venv's own. Returns its ``bin``."""
    venv.EnvBuilder(with_pip=False).create(folder)
    python = folder / "bin" / "python"
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                  cwd=folder).stdout.strip()
    (Path(purelib) / "_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", str(wheel)], cwd=folder)
    return folder / "bin"


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
        ) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def outside_the_checkout(home: Path) -> dict[str, str]:
    """An environment in which only the installed wheel can provide ``tracker``."""
    env = {name: value for name, value in os.environ.items()
           if name != "PYTHONPATH" and not name.startswith("TRACKER_")}
    return {**env, "HOME": str(home)}


def test_the_wheel_installs_a_tracker_that_works_from_an_empty_folder(tmp_path):
    wheel = build_wheel(tmp_path / "build")
    assert wheel.name.startswith(DISTRIBUTION.replace("-", "_") + "-" + __version__)
    bin_ = install_in_fresh_venv(wheel, tmp_path / "venv")
    empty = tmp_path / "empty"
    empty.mkdir()
    env = outside_the_checkout(empty)

    where = run([str(bin_ / "python"), "-c", "import tracker; print(tracker.__file__)"],
                empty, env).stdout
    assert Path(where).is_relative_to(tmp_path / "venv"), where
    assert run([str(bin_ / "tracker"), "--version"], empty, env).stdout.split()[-1] == __version__
    run([str(bin_ / "tracker"), "db", "upgrade"], empty, env)
    run([str(bin_ / "tracker"), "demo", "--days", "2", "--users", "200"], empty, env)
    assert (empty / "tracker.db").is_file()
    pages = run([str(bin_ / "python"), "-c", PAGES_RUN], empty, env).stdout
    assert "views/experiment.py Home page recommendations (simulated)" in pages, pages

    port = free_port()
    server = subprocess.Popen([str(bin_ / "tracker"), "dashboard", "--port", str(port)],
                              cwd=empty, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/_stcore/health", timeout=45)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
