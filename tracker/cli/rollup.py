"""``tracker rollup``: logs into per-arm daily and cumulative metrics."""

from __future__ import annotations

import json

import click

from tracker.cli.common import open_engine, parse_duration
from tracker.errors import TrackerError


def _progress_bar(stage: str, done: int, total: int, day) -> None:
    width = 30
    filled = width * done // max(total, 1)
    label = "days" if stage == "day" else "cumulative"
    click.echo(f"\r  {label:<10} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {day}",
               nl=done == total, err=True)


def _every(_ctx, _param, value: str | None) -> float | None:
    """``--every``: a duration (see :func:`_duration`) in seconds, parsed before anything runs;
    a bad one is a usage error naming the option ("Invalid value for '--every'")."""
    return None if value is None else parse_duration(value).total_seconds()


def _expire(engine, settings) -> None:
    """TRACKER_RETENTION_DAYS set: after a successful run of every experiment, expire the
    raw logs older than that (:func:`tracker.lifecycle.expire_logs`)."""
    from datetime import timedelta

    from tracker.lifecycle import expire_logs

    days = timedelta(days=settings.retention_days)
    click.echo(f"retention ({settings.retention_days} days): "
               f"{expire_logs(engine, settings, days).describe()}", err=True)


@click.command("rollup")
@click.option("--experiment", "experiment", metavar="KEY",
              help="Roll up this experiment only (default: every experiment).")
@click.option("--full", is_flag=True,
              help="Forget the experiment's results and rebuild them from the raw logs.")
@click.option("--until", type=click.DateTime(["%Y-%m-%d"]),
              help="Compute days up to this one only (the incremental state does not advance).")
@click.option("--every", "every", metavar="DURATION", callback=_every,
              help="Keep running: roll up, then wait this long (e.g. 24h, 30m), until SIGTERM "
                   "or SIGINT (exit 0); a failed run is reported and retried after a backoff.")
@click.option("--json", "as_json", is_flag=True, help="Print the summaries as JSON.")
def rollup_cmd(experiment: str | None, full: bool, until, every: float | None,
               as_json: bool) -> None:
    """Turn new impressions and interactions into per-arm daily and cumulative metrics.

    Incremental: only the days touched by rows logged since the last run are recomputed
    (late interactions included). A run with nothing new changes nothing. When another
    rollup of the same experiment is running, this one says so and exits without changes.
    """
    from tracker.errors import Busy
    from tracker.rollup.engine import run_rollup
    from tracker.rollup.schedule import run_every

    engine, settings = open_engine()

    def once() -> None:
        nonlocal full
        try:
            summaries = run_rollup(engine, settings, experiment, full=full,
                                   until=until.date() if until else None,
                                   progress=None if as_json else _progress_bar)
        except Busy as busy:
            click.echo(f"skipped: {busy}", err=True)
            return
        full = False  # a scheduled loop rebuilds at most once
        if experiment is None and until is None and settings.retention_days is not None:
            _expire(engine, settings)  # after a successful run of every experiment
        if as_json:
            click.echo(json.dumps([s.to_dict() for s in summaries], indent=2))
            return
        for summary in summaries:
            click.echo(summary.describe())
        if not summaries:
            click.echo("no experiments yet: create one (tracker experiments create) "
                       "or run `tracker demo`")

    if every is None:
        once()
        return

    def failed(error: Exception, retry: float) -> None:
        reason = str(error) if isinstance(error, TrackerError) else \
            f"{type(error).__name__}: {error}"
        click.echo(f"rollup failed: {reason}; next try in {retry:g} s", err=True)

    stopped = run_every(once, every, failed)
    click.echo(f"rollup loop stopped by {stopped}", err=True)

