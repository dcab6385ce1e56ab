"""The ``tracker`` command: parse, call one library function, print.

One module per command group (``db``, ``experiments``, ``import``, ``rollup``, ``report`` and
``demo``, ``dashboard``/``serve``/``keys``, ``alerts``); what they share is in
:mod:`tracker.cli.common`.
Heavy imports (alembic, pandas) happen inside the commands that need them.
"""

from __future__ import annotations

import click

from tracker import __version__
from tracker.cli import (
    alerts,
    config,
    db,
    experiments,
    export,
    imports,
    lifecycle,
    report,
    rollup,
    serve,
)
from tracker.errors import TrackerError


class _Group(click.Group):
    """Turns tracker's own errors into one clear line and exit code 1, in click's style for
    usage errors ("Error: ...", exit 2), so every failure reads the same."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except TrackerError as error:
            click.echo(f"Error: {error}", err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="tracker")
def main() -> None:
    """Online A/B experiment tracker for recommender systems.

    The database is TRACKER_DATABASE_URL (default: the SQLite file ./tracker.db).
    """


for _command in (config.config_cmd, db.db, experiments.experiments, imports.import_,
                 rollup.rollup_cmd, report.report_cmd, report.demo_cmd, serve.dashboard_cmd,
                 serve.serve_cmd, serve.keys, lifecycle.users, lifecycle.logs, export.export_cmd,
                 alerts.alerts):
    main.add_command(_command)
