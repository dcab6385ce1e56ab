"""``tracker config``."""

from __future__ import annotations

import click

from tracker.cli.common import settings_from_env
from tracker.config import Settings


@click.command("config")
def config_cmd() -> None:
    """Show every TRACKER_* setting, its current value and what it does."""
    settings = settings_from_env()
    for env, default, doc in Settings.describe():
        click.echo(f"{env}={settings.shown(env)}  (default {default})\n    {doc}")
