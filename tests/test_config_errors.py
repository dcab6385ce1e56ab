"""Every configuration error is one clear line from the CLI and a typed exception from the
Python API (issue 29): bad URL parts, an unknown driver, an unreachable server, a SQLite
file that cannot be created."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tracker import Tracker
from tracker.cli import main
from tracker.errors import ConfigError, StoreUnavailable

_FORMS = "sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB"
CASES = [
    pytest.param("postgresql://u@db:fivefour/x", ConfigError,
                 "a port number from 1 to 65535 after the host, got 'fivefour'",
                 id="a-port-that-is-no-number-is-named"),
    pytest.param("postgresql://u@db:70000/x", ConfigError, "got '70000'",
                 id="a-port-out-of-range-is-named"),
    pytest.param("postgresql://u@[::1/x", ConfigError, "an IPv6 host in brackets",
                 id="an-unclosed-ipv6-bracket-is-named"),
    pytest.param("mysql://u@db/x", ConfigError, f"{_FORMS}, not driver 'mysql'",
                 id="an-unknown-driver-is-named"),
    pytest.param("postgresql+asyncpg://u@db/x", ConfigError,
                 "not driver 'postgresql+asyncpg'", id="another-postgresql-driver-is-named"),
    pytest.param("sqlite://tracker.db", ConfigError, "a SQLite path after three slashes",
                 id="a-sqlite-url-with-two-slashes-says-three"),
    pytest.param("postgresql+psycopg://u@127.0.0.1:1/x", StoreUnavailable,
                 'connection to server at "127.0.0.1", port 1 failed',
                 id="an-unreachable-server-is-named"),
    pytest.param("sqlite:////proc/tracker.db", StoreUnavailable,
                 "SQLite database /proc/tracker.db",
                 id="a-folder-no-one-may-write-names-the-file"),
    pytest.param("sqlite:///{tmp}/a-file/tracker.db", StoreUnavailable,
                 "a-file is not a folder", id="a-folder-that-is-a-file-is-named"),
    pytest.param("sqlite:///{tmp}/missing/tracker.db", StoreUnavailable,
                 "folder {tmp}/missing does not exist", id="a-missing-folder-is-named"),
]


def _filled(text: str, tmp: Path) -> str:
    (tmp / "a-file").touch()
    return text.replace("{tmp}", str(tmp))


@pytest.mark.parametrize(("url", "kind", "said"), CASES)
def test_the_python_api_raises_a_typed_error_of_one_line(url, kind, said, tmp_path):
    url, said = _filled(url, tmp_path), _filled(said, tmp_path)
    with pytest.raises(kind) as refused:
        Tracker(url)
    message = str(refused.value)
    assert said in message and "\n" not in message


@pytest.mark.parametrize(("url", "kind", "said"), CASES)
def test_the_cli_says_one_line(url, kind, said, tmp_path):
    url, said = _filled(url, tmp_path), _filled(said, tmp_path)
    result = CliRunner().invoke(main, ["experiments", "list"],
                                env={"TRACKER_DATABASE_URL": url})
    assert isinstance(result.exception, SystemExit), result.exception  # no traceback
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith("Error: ") and said in line
