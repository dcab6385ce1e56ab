"""``tracker dashboard``, ``tracker serve`` and ``tracker keys``: the servers and their keys."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from tracker.cli.common import (
    format_option,
    open_engine,
    options_for,
    print_table,
    settings_from_env,
)
from tracker.config import mask_password


def dashboard_command(app: Path, host: str, port: int) -> list[str]:
    """The Streamlit command line that serves the dashboard ``app``."""
    return [sys.executable, "-m", "streamlit", "run", str(app),
            "--server.address", host, "--server.port", str(port), "--server.headless", "true",
            "--browser.gatherUsageStats", "false", "--global.developmentMode", "false"]


@click.command("dashboard")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8501, show_default=True, type=click.IntRange(1, 65535),
              help="Port to listen on.")
def dashboard_cmd(host: str, port: int) -> None:
    """Serve the Streamlit dashboard on the database of TRACKER_DATABASE_URL (read-only)."""
    import os

    from tracker.install import DASHBOARD, require, shipped

    require("dashboard", "tracker dashboard")
    app = shipped(DASHBOARD) / "app.py"  # the installed copy, or the source checkout's
    click.echo(f"tracker dashboard on http://{host}:{port} (database "
               f"{mask_password(settings_from_env().database_url)})", err=True)
    command = dashboard_command(app, host, port)
    root = str(app.parents[1])  # so that the pages can `import dashboard`
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = root if not path else f"{root}{os.pathsep}{path}"
    os.execv(command[0], command)


# ---------------------------------------------------------------------------- collector
@click.command("serve")
@click.option("--host", help="Address to listen on (default TRACKER_COLLECTOR_HOST, 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65535),
              help="Port (default TRACKER_COLLECTOR_PORT, 8000).")
@click.option("--workers", type=click.IntRange(min=1),
              help="Worker processes (default TRACKER_COLLECTOR_WORKERS, 1).")
def serve_cmd(host: str | None, port: int | None, workers: int | None) -> None:
    """Run the HTTP collector: production services POST impressions and interactions.

    API keys (`tracker keys create`) authenticate the callers; /health, /metrics and the
    OpenAPI document (/openapi.json, /docs) are served too.
    """
    from tracker.errors import ConfigError
    from tracker.install import require

    require("server", "tracker serve")
    from tracker.collector.server import serve

    try:
        settings = settings_from_env().replace(**{name: value for name, value in (
            ("collector_host", host), ("collector_port", port),
            ("collector_workers", workers)) if value is not None})
    except ConfigError as error:
        raise click.BadParameter(str(error), param_hint="--host") from None
    serve(settings)


@click.group()
def keys() -> None:
    """API keys of the HTTP collector (stored only as hashes)."""


@keys.command("create")
@click.argument("name")
@click.option("--scope", type=click.Choice(["ingest", "read"]), required=True,
              help="ingest: send events; read: read experiments.")
@click.option("--experiment", "experiments", multiple=True, metavar="KEY",
              help="Limit the key to this experiment (repeat for several); default: every "
                   "experiment. The collector refuses (403) impressions of, and reads of, "
                   "any other.")
def keys_create(name: str, scope: str, experiments: tuple[str, ...]) -> None:
    """Create an API key called NAME and print it (the only time it is shown)."""
    from tracker.store.db import require_current_schema, transaction
    from tracker.store.keys import create_key

    engine, _ = open_engine()
    require_current_schema(engine)
    with options_for(name="NAME", experiment="--experiment"), \
            transaction(engine, write=True) as conn:
        info, token = create_key(conn, name, scope, experiments or None)
    click.echo(f"created API key {info.key_id} ({info.name!r}, scope {info.scope}, "
               f"{_reach(info.experiments)}); store it now, it is not shown again:", err=True)
    click.echo(token)


@keys.command("list")
@format_option("json")
def keys_list(fmt: str) -> None:
    """List API keys (ids, names, scopes, the experiments each is limited to, revocation;
    never the secrets)."""
    from tracker.store.db import require_current_schema, transaction
    from tracker.store.keys import list_keys

    engine, _ = open_engine()
    require_current_schema(engine)
    with transaction(engine) as conn:
        found = list_keys(conn)
    if fmt == "json":
        click.echo(json.dumps([k.to_dict() for k in found], indent=2))
        return
    if not found:
        click.echo("no API keys yet: create one with `tracker keys create NAME --scope ingest`")
        return
    print_table(("ID", "NAME", "SCOPE", "EXPERIMENTS", "CREATED", "REVOKED"),
                [(k.key_id, k.name, k.scope, ", ".join(k.experiments or ("(every)",)),
                  k.created_at.strftime("%Y-%m-%d %H:%M"),
                  k.revoked_at.strftime("%Y-%m-%d %H:%M") if k.revoked_at else "-")
                 for k in found])


def _reach(experiments: tuple[str, ...] | None) -> str:
    return ("every experiment" if experiments is None
            else f"experiment{'s' if len(experiments) > 1 else ''} {', '.join(experiments)}")


@keys.command("revoke")
@click.argument("key_id")
def keys_revoke(key_id: str) -> None:
    """Revoke the API key KEY_ID (its id, or the whole key); the collector refuses it within
    TRACKER_COLLECTOR_KEY_CACHE_SECONDS."""
    from tracker.store.db import require_current_schema, transaction
    from tracker.store.keys import parse_token, revoke_key

    parsed = parse_token(key_id)
    key_id = parsed[0] if parsed else key_id
    engine, _ = open_engine()
    require_current_schema(engine)
    with transaction(engine, write=True) as conn:
        info = revoke_key(conn, key_id)
    click.echo(f"revoked API key {info.key_id} ({info.name!r}) at {info.revoked_at:%Y-%m-%d %H:%M}")
