"""docker-compose.yml: there is no Docker engine here, so check what can be checked: the file
parses, the services are wired as documented, and every service's command is a real
``tracker`` command whose options click accepts (the suite runs those commands elsewhere:
`db upgrade` in test_cli, `serve` in tests/collector, `rollup` in tests/rollup)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
import yaml

from tracker.cli import main

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
_VAR = re.compile(r"\$\{(\w+)(?::?[-?])([^}]*)\}")


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR:-default}`` / ``${VAR:?message}`` with an environment."""
    return _VAR.sub(lambda m: env.get(m.group(1), m.group(2)), text)


def _tracker_services():
    return [pytest.param(name, id=name) for name, service in SERVICES.items()
            if service.get("command", [None])[0] == "tracker"]


@pytest.mark.parametrize("name", _tracker_services())
def test_service_command_is_a_registered_tracker_command(name):
    args = [interpolate(a, {}) for a in SERVICES[name]["command"][1:]]
    command: click.Command = main
    path = []
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        word = args.pop(0)
        found = command.get_command(click.Context(command), word)
        assert found is not None, f"{name}: `tracker {' '.join(path + [word])}` does not exist"
        command, path = found, path + [word]
    assert not isinstance(command, click.Group), f"{name}: `tracker {' '.join(path)}` is a group"
    # click parses the options exactly as the container would (unknown option: an error)
    command.make_context(" ".join(["tracker", *path]), args)


def test_the_rollup_interval_is_configurable_and_parses():
    from tracker.cli.common import parse_duration

    command = SERVICES["rollup"]["command"]
    assert command[:3] == ["tracker", "rollup", "--every"]
    assert parse_duration(interpolate(command[3], {})).total_seconds() == 24 * 3600
    six_hours = interpolate(command[3], {"TRACKER_ROLLUP_INTERVAL": "6h"})
    assert parse_duration(six_hours).seconds == 21600


def test_services_are_wired_as_documented():
    assert set(SERVICES) == {"postgres", "migrate", "collector", "rollup", "dashboard"}
    postgres = SERVICES["postgres"]
    volume = postgres["volumes"][0].split(":")[0]
    assert volume in COMPOSE["volumes"]  # a named volume, not a bind mount
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert SERVICES["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert SERVICES["migrate"]["restart"] == "no"
    for name in ("collector", "rollup", "dashboard"):
        assert SERVICES[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"}}
    for name, service in SERVICES.items():
        assert "env_file" not in service, f"{name}: configuration is environment variables only"
        if name != "postgres":
            url = service["environment"]["TRACKER_DATABASE_URL"]
            assert url.startswith("postgresql+psycopg://") and "@postgres:5432/" in url


def test_every_tracker_variable_in_compose_is_a_declared_setting():
    from tracker.config import Settings

    declared = {env for env, _, _ in Settings.describe()}
    used = {name for service in SERVICES.values() for name in service.get("environment", {})
            if name.startswith("TRACKER_")}
    assert used and used <= declared, used - declared


def test_the_image_installs_the_wheel_with_every_service_extra():
    from tests.test_wheel import BUILD_INPUTS

    dockerfile = (ROOT / "Dockerfile").read_text()
    copied = {source for line in dockerfile.splitlines() if line.startswith("COPY ")
              for source in line.split()[1:-1]}
    assert set(BUILD_INPUTS) <= copied, set(BUILD_INPUTS) - copied
    # not editable: the wheel carries migrations/ and dashboard/ (tests/test_wheel.py);
    # the collector's server extra, the dashboard's, and postgres for the database; not spark
    assert re.search(r"pip install '/src\[server,dashboard,postgres\]'", dockerfile)
    assert "pip install -e" not in dockerfile
