"""Spark for the tests: one local[2] session for the whole run (small memory, no UI, two
shuffle partitions), and a standalone master and worker on 127.0.0.1 started and stopped by
process id. Every test here skips, with the reason, when pyspark or Java is missing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.spark.support import SKIP_REASON

ROOT = Path(__file__).resolve().parents[2]

LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "512m",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}
"""The settings of every test session (the standalone smoke test's too)."""


def pytest_collection_modifyitems(config, items):
    if SKIP_REASON is None:
        return
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


def spark_environment() -> dict[str, str]:
    """The environment of Spark's processes: this interpreter for the Python workers, and
    every address on loopback."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession shared by the whole run, stopped at its end."""
    if SKIP_REASON is not None:
        pytest.skip(SKIP_REASON)
    from pyspark.sql import SparkSession

    os.environ.update({k: v for k, v in spark_environment().items()
                       if k.startswith(("PYSPARK_", "SPARK_"))})
    builder = SparkSession.builder.master("local[2]").appName("tracker-tests")
    for key, value in LOCAL_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class Standalone:
    """A running standalone cluster: its master URL and the log folder."""

    master: str
    logs: Path


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_for(log: Path, text: str, process: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            raise RuntimeError(f"{log.name}: exited {process.returncode} before {text!r}:\n"
                               f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"{log.name}: no {text!r} within {seconds} s:\n"
                       f"{log.read_text(errors='replace')[-3000:]}")


def _start(args: list[str], log: Path) -> subprocess.Popen:
    env = {**spark_environment(), "SPARK_DAEMON_MEMORY": "256m",
           "SPARK_NO_DAEMONIZE": "1"}
    with open(log, "wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen([str(_spark_class()), *args], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)


def _stop(process: subprocess.Popen) -> None:
    """Stop one process we started, by its id (spark-class execs java: same pid)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory) -> Iterator[Standalone]:
    """A standalone master and one worker (1 core, 512 MB) on 127.0.0.1, from the pip
    package's ``bin/spark-class`` (it ships no sbin start scripts), stopped afterwards."""
    if SKIP_REASON is not None:
        pytest.skip(SKIP_REASON)
    logs = tmp_path_factory.mktemp("standalone")
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    master = _start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(free_port())],
                    logs / "master.log")
    worker = None
    try:
        _wait_for(logs / "master.log", "I have been elected leader", master, 60)
        worker = _start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                         "--webui-port", str(free_port()), "--cores", "1", "--memory", "512m",
                         "--work-dir", str(logs / "work"), master_url], logs / "worker.log")
        _wait_for(logs / "master.log", "Registering worker", master, 60)
        yield Standalone(master_url, logs)
    finally:
        for process in (worker, master):
            if process is not None:
                _stop(process)
