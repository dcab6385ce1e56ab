"""``tracker experiments start|stop|archive|delete``, ``tracker users delete`` and
``tracker logs expire``: an experiment's lifecycle, erasure and retention
(:mod:`tracker.lifecycle`)."""

from __future__ import annotations

import json

import click

from tracker.cli.common import confirm, experiment_argument, format_option, parse_duration
from tracker.cli.experiments import experiments


def _status_command(name: str, target: str, doc: str) -> click.Command:
    @click.command(name, help=doc)
    @experiment_argument("key")
    def command(key: str) -> None:
        from tracker import lifecycle
        from tracker.cli.common import open_engine

        engine, _ = open_engine()
        change = lifecycle.change_status(engine, key, target)
        click.echo(f"experiment {key!r} is {target}" + ("" if change.changed else
                                                          " already; nothing changed"))
    return command


for _command in (
    _status_command("start", "running",
                    "Make EXPERIMENT (a draft, or stopped) running: it takes impressions."),
    _status_command("stop", "stopped",
                    "Stop EXPERIMENT: its new impressions are rejected; interactions still "
                    "come in, so the rollup finishes the attribution windows of the lists "
                    "served before."),
    _status_command("archive", "archived",
                    "Archive stopped EXPERIMENT: it leaves `experiments list` (see --all) "
                    "and the dashboard, and `tracker rollup` skips it once its days are final. "
                    "Its impressions must all be rolled up first."),
):
    experiments.add_command(_command)


@experiments.command("delete")
@experiment_argument("key")
@click.option("--yes", is_flag=True, help="Delete without asking (for scripts).")
def experiments_delete(key: str, yes: bool) -> None:
    """Delete EXPERIMENT with its impressions, results and rollup state. Interactions
    stay (they belong to users and may answer other experiments). Asks first; without a
    terminal to ask on, it refuses (exit 2) unless --yes is given."""
    from tracker import lifecycle
    from tracker.cli.common import open_engine

    engine, _ = open_engine()
    rows = lifecycle.experiment_rows(engine, key)
    confirm(f"deleting experiment {key!r} removes {rows.impressions} impressions and the "
            f"results of {rows.days} days", yes)
    click.echo(lifecycle.delete_experiment(engine, key).describe())


@click.group("users")
def users() -> None:
    """Erase a user's data (the GDPR's right to erasure, Article 17)."""


@users.command("delete")
@click.argument("user_id")
@click.option("--yes", is_flag=True, help="Delete without asking (for scripts).")
@format_option("json")
def users_delete(user_id: str, yes: bool, fmt: str) -> None:
    """Erase USER_ID's impressions and interactions in every experiment and mark the days
    they entered for recomputation (the next `tracker rollup` rebuilds them without the
    user). Asks first; without a terminal, refuses (exit 2) unless --yes is given."""
    from tracker.sdk import Tracker

    confirm(f"erasing user {user_id!r} deletes their impressions and interactions in every "
            "experiment", yes)
    with Tracker() as t:
        erasure = t.delete_user(user_id)
    if fmt == "json":
        click.echo(json.dumps(erasure.to_dict(), indent=2))
        return
    click.echo(f"user {user_id!r}: deleted {erasure.impressions} impressions and "
               f"{erasure.interactions} interactions")
    for part in erasure.experiments:
        days = (f"{len(part.days_marked)} day(s) to recompute "
                f"({part.days_marked[0]} .. {part.days_marked[-1]})" if part.days_marked
                else "no rolled-up day to recompute")
        click.echo(f"  {part.experiment}: {part.impressions} impressions; {days}")
    if any(p.days_marked for p in erasure.experiments):
        click.echo("run `tracker rollup` to recompute those days without the user")


@click.group("logs")
def logs() -> None:
    """Expire old raw logs (retention)."""


@logs.command("expire")
@click.option("--older-than", "older_than", metavar="AGE",
              help="Expire impressions and interactions older than this (e.g. 90d); default: "
                   "TRACKER_RETENTION_DAYS days.")
@click.option("--yes", is_flag=True, help="Delete without asking (for scripts).")
@click.option("--dry-run", is_flag=True, help="Only count the rows that would go.")
def logs_expire(older_than: str | None, yes: bool, dry_run: bool) -> None:
    """Delete raw impressions and interactions older than AGE. The rollup's results of those
    days stay (the report and dashboard still show them) and are never recomputed; so
    `tracker rollup --full` then refuses for experiments with such days. Refuses while an
    experiment holds older impressions not rolled up yet. Asks first; without a terminal,
    refuses (exit 2) unless --yes is given."""
    from datetime import timedelta

    from tracker.sdk import Tracker

    age = None if older_than is None else parse_duration(older_than, "--older-than",
                                                         maximum=timedelta(days=36_500))
    with Tracker() as t:
        if age is None and t.settings.retention_days is None:
            raise click.UsageError("give --older-than (e.g. 90d) or set TRACKER_RETENTION_DAYS")
        planned = t.expire_logs(age, dry_run=True)
        if dry_run:
            click.echo(planned.describe())
            return
        confirm(f"expiring logs {planned.describe().removeprefix('would delete ')}", yes)
        click.echo(t.expire_logs(age).describe())
