"""``tracker import``: backfill logs from files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from tracker.cli.common import StepProgress, format_option, json_alias


@click.group("import")
def import_() -> None:
    """Backfill impressions or interactions from CSV, JSON, JSON Lines or Parquet files."""


def _import(kind: str, path: Path, fmt: str | None, show_rejected: int, as_json: bool) -> None:
    from tracker.errors import FileError
    from tracker.ingest.files import detect_format, file_records
    from tracker.ingest.result import IngestResult
    from tracker.sdk import Tracker

    try:
        records = file_records(path, detect_format(path, fmt), kind=kind)
    except FileError as error:  # checked before anything is stored
        _import_report(IngestResult(kind), None, show_rejected, as_json, str(error))
        sys.exit(2)
    with Tracker() as t:
        log = t.log_impressions if kind == "impressions" else t.log_interactions
        with StepProgress(f"importing {kind}", records.size_hint()) as bar:
            result = log(records, progress=bar.advance)
    _import_report(result, records, show_rejected, as_json, None)
    if result.rejected or result.conflict_ids or records.problems:
        sys.exit(2)


def _import_report(result, records, show_rejected: int, as_json: bool,
                   error: str | None) -> None:
    """The summary of an import; each rejection, each unread part and a file error say the
    file and where (line, record or row)."""
    problems = [error] if error else list(records.problems)
    if as_json:
        out = result.to_dict()
        if records is not None:
            for entry, rejection in zip(out["rejected"], result.rejected, strict=True):
                entry["where"] = records.where(rejection.index)
        out["errors"] = problems
        click.echo(json.dumps(out, indent=2))
        return
    for problem in problems:
        click.echo(f"Error: {problem}", err=True)
    click.echo(result.summary() + ("; nothing stored" if error else ""))
    for rejection in result.rejected[:show_rejected]:
        click.echo(f"  rejected {records.describe(rejection)}")
    if len(result.rejected) > show_rejected:
        click.echo(f"  ... and {len(result.rejected) - show_rejected} more rejected "
                   "(--show-rejected N, or --format json for all)")
    if result.conflict_ids:
        click.echo(f"  conflicts (already stored with a different payload, kept): "
                   f"{', '.join(result.conflict_ids[:10])}")


_IMPORT_HELP = """Import {kind} from FILE (.csv, .json, .jsonl/.ndjson, .parquet).

Fields as in Tracker.log_{one}: {fields}. In CSV, list columns hold a JSON array or ids
separated by '|'. A .json file holds one JSON array of objects (or one object); JSON Lines one
object per line. Text is UTF-8 (a byte order mark is fine) or UTF-16 with a byte order mark.

Exits 2 when the file cannot be read (nothing stored), or when any record was rejected or
conflicted or part of the file could not be read (the valid records are stored); each problem
names the file and the line, record or row.
"""


_OLD_INPUT_FORMATS = {name: f"input:{name}" for name in ("csv", "jsonl", "parquet")}
"""``--format csv`` once named the file's format (now ``--input-format``): still read."""


def _import_command(kind: str, one: str, fields: str):
    @click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
    @click.option("--input-format", "input_format",
                  type=click.Choice(["csv", "json", "jsonl", "parquet"]),
                  help="The file's format (default: from the extension).")
    @click.option("--show-rejected", default=20, show_default=True, type=click.IntRange(min=0),
                  help="How many rejected records to print.")
    @format_option("json", aliases=_OLD_INPUT_FORMATS)
    @json_alias
    def command(file: Path, input_format: str | None, show_rejected: int, fmt: str,
                as_json: bool) -> None:
        if fmt.startswith("input:"):
            click.echo(f"Warning: --format {fmt[6:]} is deprecated; use --input-format "
                       f"{fmt[6:]}", err=True)
            input_format, fmt = input_format or fmt[6:], "text"
        _import(kind, file, input_format, show_rejected, as_json or fmt == "json")

    command.__doc__ = _IMPORT_HELP.format(kind=kind, one=one, fields=fields)
    return import_.command(kind)(command)


_import_command("impressions", "impression", "impression_id, experiment, arm, user_id, items, "
                "served_at, and optionally scores, baseline_items, context")
_import_command("interactions", "interaction", "event_id, user_id, item_id, event, "
                "occurred_at, and optionally value, impression_id")
