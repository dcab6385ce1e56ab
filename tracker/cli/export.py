"""``tracker export``: the database's logs as Parquet in the lake layout
(:mod:`tracker.lake.export`), the way from one machine to Spark."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from tracker.cli.common import experiment_argument, format_option, open_engine

_DIRECTORY = click.Path(file_okay=False, path_type=Path)


@click.command("export")
@experiment_argument(required=False)
@click.option("--impressions", "impressions", type=_DIRECTORY, required=True, metavar="DIR",
              help="Where the impressions go (an empty or new directory).")
@click.option("--interactions", "interactions", type=_DIRECTORY, required=True,
              metavar="DIR", help="Where the interactions go (an empty or new directory).")
@click.option("--overwrite", is_flag=True,
              help="Replace an earlier export in DIR (only its own files, recognised by "
                   "its marker and layout; a DIR holding anything else is refused).")
@click.option("--buckets", type=click.IntRange(min=1), default=None, metavar="N",
              help="Bucket both logs by user into N buckets (day=.../bucket=B/ folders): "
                   "the Spark rollup then scores each bucket without a shuffle. Pick N near "
                   "a day's impressions / 200,000.")
@format_option("json")
def export_cmd(experiment: str | None, impressions: Path, interactions: Path, overwrite: bool,
               buckets: int | None, fmt: str) -> None:
    """Write the logs as Parquet in the lake layout (docs/spark.md, "Lake layout and export"):
    impressions of EXPERIMENT (default: of every experiment) and every interaction (they
    belong to no experiment), one folder per UTC day, day=YYYY-MM-DD/part-N.parquet
    (with --buckets, day=YYYY-MM-DD/bucket=B/part-N.parquet)."""
    from tracker.lake.export import export_logs

    engine, _ = open_engine()
    done = export_logs(engine, impressions, interactions, experiment, overwrite=overwrite,
                       buckets=buckets)
    if fmt == "json":
        click.echo(json.dumps(asdict(done)))
        return
    click.echo(f"impressions: {done.impressions} rows in {done.impression_files} files "
               f"({', '.join(done.experiments) or 'no experiment'}) -> {impressions}")
    click.echo(f"interactions: {done.interactions} rows in {done.interaction_files} files "
               f"-> {interactions}")
