"""``tracker rollup``: logs into per-arm daily and cumulative metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

import click

from tracker.cli.common import (
    StepProgress,
    experiment_argument,
    format_option,
    json_alias,
    open_engine,
    parse_duration,
)
from tracker.errors import Busy, RollupIncomplete, describe

if TYPE_CHECKING:
    from tracker.rollup.engine import Progress


class _Stages:
    """The rollup's progress callback (``stage, done, total, day``): one
    :class:`~tracker.cli.common.StepProgress` per stage of each experiment ("days", then
    "cumulative"), the previous one ended when the next begins."""

    def __init__(self) -> None:
        self._bar: StepProgress | None = None
        self._stage: str | None = None

    def __call__(self, stage: str, done: int, total: int, day) -> None:
        if self._bar is None or stage != self._stage or done <= self._bar.done:
            self.close()
            label = "days" if stage == "day" else "cumulative"
            self._bar, self._stage = StepProgress(f"  {label:<10}", total).__enter__(), stage
        self._bar.advance(done - self._bar.done, day)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


@contextmanager
def rollup_progress() -> Iterator[Progress]:
    """The progress callback of one ``tracker rollup`` run (tests/rollup/paused_cli.py wraps
    it to pause a run)."""
    stages = _Stages()
    try:
        yield stages
    finally:
        stages.close()


def _every(_ctx, _param, value: str | None) -> float | None:
    """``--every``: a duration (:func:`~tracker.cli.common.parse_duration`) in seconds,
    parsed before anything runs; a bad one is a usage error naming the option ("Invalid
    value for '--every'")."""
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
@experiment_argument(required=False)
@click.option("--experiment", "experiment_option", metavar="EXPERIMENT", hidden=True,
              help="Older spelling of the EXPERIMENT argument (still read).")
@click.option("--full", is_flag=True,
              help="Forget the experiment's results and rebuild them from the raw logs.")
@click.option("--until", type=click.DateTime(["%Y-%m-%d"]),
              help="Compute days up to this one only (the incremental state does not advance).")
@click.option("--every", "every", metavar="DURATION", callback=_every,
              help="Keep running: roll up, then wait this long (e.g. 24h, 30m), until SIGTERM "
                   "or SIGINT (exit 0); a failed run is reported and retried after a backoff.")
@click.option("--engine", "engine_name", type=click.Choice(["default", "spark"]), default="default",
              show_default=True,
              help="Where the logs are rolled up: the tracker database (default), or Apache "
                   "Spark over a Parquet lake (the spark extra; needs --impressions and "
                   "--interactions).")
@click.option("--impressions", "impressions_dir", metavar="DIR",
              help="--engine spark: the lake's impressions (Parquet files under DIR).")
@click.option("--interactions", "interactions_dir", metavar="DIR",
              help="--engine spark: the lake's interactions (Parquet files under DIR).")
@click.option("--state", "state_dir", metavar="DIR",
              help="--engine spark: the state directory kept between runs (per-user totals, "
                   "the files taken); without it every run rebuilds.")
@click.option("--master", metavar="URL",
              help="--engine spark: the Spark master (default: local[*], or the session "
                   "spark-submit started).")
@format_option("json")
@json_alias
def rollup_cmd(experiment: str | None, experiment_option: str | None, full: bool, until,
               every: float | None, engine_name: str, impressions_dir: str | None,
               interactions_dir: str | None, state_dir: str | None, master: str | None,
               fmt: str, as_json: bool) -> None:
    """Turn new impressions and interactions into per-arm daily and cumulative metrics, of
    EXPERIMENT or, without it, of every experiment.

    Incremental: only the days touched by rows logged since the last run are recomputed
    (late interactions included). A run with nothing new changes nothing. When another
    rollup of the same experiment is running, this one says so and exits without changes.
    Progress goes to standard error: a bar on a terminal, else a line per day. Without
    EXPERIMENT, one that fails does not stop the others: they are rolled up, then the failed
    ones named, exit 1 (0 when they were only skipped, busy in another rollup).
    """
    from tracker.rollup.engine import run_rollup
    from tracker.rollup.schedule import run_every

    if experiment and experiment_option and experiment != experiment_option:
        raise click.UsageError(f"two experiments given ({experiment!r} and --experiment "
                               f"{experiment_option!r}): give EXPERIMENT once")
    experiment = experiment or experiment_option
    as_json = as_json or fmt == "json"
    spark_options = {"--impressions": impressions_dir, "--interactions": interactions_dir,
                     "--state": state_dir, "--master": master}
    if _on_spark(engine_name, experiment, full, until, every, spark_options, as_json):
        return
    engine, settings = open_engine()

    def once() -> None:
        nonlocal full
        try:
            with nullcontext() if as_json else rollup_progress() as progress:
                summaries = run_rollup(engine, settings, experiment, full=full,
                                       until=until.date() if until else None,
                                       progress=progress)
        except Busy as busy:
            click.echo(f"skipped: {busy}", err=True)
            return
        except RollupIncomplete as incomplete:  # every experiment: some did not roll up
            full = False  # the others were rebuilt: a retry does not rebuild them again
            _incomplete(incomplete, as_json)
            return  # no retention: not every experiment has run
        full = False  # a scheduled loop rebuilds at most once
        if experiment is None and until is None and settings.retention_days is not None:
            _expire(engine, settings)  # after a successful run of every experiment
        _show(summaries, as_json)
        if not summaries and not as_json:
            click.echo("no experiments yet: create one (tracker experiments create) "
                       "or run `tracker demo`")

    if every is None:
        once()
        return

    def failed(error: Exception, retry: float) -> None:
        click.echo(f"rollup failed: {describe(error)}; next try in {retry:g} s", err=True)

    stopped = run_every(once, every, failed)
    click.echo(f"rollup loop stopped by {stopped}", err=True)



def _on_spark(engine_name: str, experiment: str | None, full: bool, until,
              every: float | None, options: dict[str, str | None], as_json: bool) -> bool:
    """``--engine spark``: the lake rolled up on Spark into the tracker database (True);
    False for the default engine, which takes none of the Spark options."""
    if engine_name != "spark":
        given = [name for name, value in options.items() if value is not None]
        if given:
            raise click.UsageError(f"{', '.join(given)}: only with --engine spark")
        return False
    missing = [name for name in ("--impressions", "--interactions") if options[name] is None]
    if missing:
        raise click.UsageError(f"--engine spark needs {' and '.join(missing)} DIR")
    for name, value in (("--until", until), ("--every", every)):
        if value is not None:
            raise click.UsageError(f"{name} is not available with --engine spark")
    from tracker.install import require

    require("spark", "tracker rollup --engine spark")
    from tracker.errors import Busy
    from tracker.spark.rollup import rollup
    from tracker.spark.session import session

    spark = session(options["--master"])
    try:
        summaries = rollup(spark, options["--impressions"], options["--interactions"],
                           experiment=experiment, state=options["--state"], full=full)
    except Busy as busy:
        click.echo(f"skipped: {busy}", err=True)
        return True
    _show(summaries, as_json)
    return True


def _incomplete(incomplete: RollupIncomplete, as_json: bool) -> None:
    """A run of every experiment that some did not finish: the others' summaries, then the
    error (exit 1, its message naming each failed experiment and why), or, when they were
    only busy elsewhere, a ``skipped`` line each on stderr."""
    failures = [{"experiment": key, "error": describe(error), "busy": isinstance(error, Busy)}
                for key, error in incomplete.failures]
    _show(incomplete.summaries, as_json, failures)
    if not incomplete.only_busy:
        raise incomplete
    for failure in failures:
        click.echo(f"skipped {failure['experiment']}: another rollup of it is running",
                   err=True)


def _show(summaries, as_json: bool, failures: list[dict] | None = None) -> None:
    """The run's summaries: a JSON list, or a paragraph each. In JSON, an experiment that did
    not roll up is an object of its own in the list: ``experiment``, ``error`` and ``busy``
    (true when it was only skipped, another rollup of it running)."""
    if as_json:
        click.echo(json.dumps([s.to_dict() for s in summaries] + (failures or []), indent=2))
        return
    for summary in summaries:
        click.echo(summary.describe())
