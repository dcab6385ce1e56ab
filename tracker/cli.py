"""The ``tracker`` command: parse, call one library function, print.

Heavy imports (alembic, pandas) happen inside the commands that need them.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracker import __version__
from tracker.config import Settings, mask_password
from tracker.errors import TrackerError, ValidationError

if TYPE_CHECKING:
    from tracker.store.schema import TableRows


def _settings() -> Settings:
    return Settings.from_env()


def _engine():
    from tracker.store.db import create_engine

    settings = _settings()
    return create_engine(settings.database_url, settings), settings


def _where(engine) -> str:
    return mask_password(engine.url.render_as_string(hide_password=False))


class _Group(click.Group):
    """Turns tracker's own errors into one clear line and exit code 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except TrackerError as error:
            click.echo(f"error: {error}", err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="tracker")
def main() -> None:
    """Online A/B experiment tracker for recommender systems.

    The database is TRACKER_DATABASE_URL (default: the SQLite file ./tracker.db).
    """


@main.command("config")
def config_cmd() -> None:
    """Show every TRACKER_* setting, its current value and what it does."""
    settings = _settings()
    for env, default, doc in Settings.describe():
        click.echo(f"{env}={settings.shown(env)}  (default {default})\n    {doc}")


# ----------------------------------------------------------------------------- db
@main.group()
def db() -> None:
    """Create and migrate the database schema (Alembic)."""


@db.command()
@click.option("--revision", default="head", show_default=True, help="Target revision.")
def upgrade(revision: str) -> None:
    """Create the schema, or migrate it up to REVISION."""
    from tracker.store import schema

    engine, _ = _engine()
    before = schema.current(engine)
    with _options(revision="--revision"):
        after = schema.upgrade(engine, revision)
    click.echo(f"{_where(engine)}: schema {before or 'empty'} -> {after}")


@db.command()
@click.option("--revision", default="-1", show_default=True,
              help="Target revision ('-1' = one step down, 'base' = drop everything).")
@click.option("--yes", is_flag=True,
              help="Drop tables that hold rows without asking (for scripts).")
def downgrade(revision: str, yes: bool) -> None:
    """Migrate the schema down (data in dropped tables is lost).

    When it would drop tables that hold rows, it names them with their row counts and asks
    first; without a terminal to ask on, it refuses (exit 2) unless --yes is given.
    """
    from tracker.store import schema

    engine, _ = _engine()
    before = schema.current(engine)
    with _options(revision="--revision"):
        _confirm_dropping([t for t in schema.tables_dropped_by(engine, revision) if t.rows],
                          revision, yes)
        after = schema.downgrade(engine, revision)
    click.echo(f"{_where(engine)}: schema {before or 'empty'} -> {after or 'empty'}")


def _confirm_dropping(tables: list[TableRows], revision: str, yes: bool) -> None:
    """Ask before dropping ``tables`` (:class:`~tracker.store.schema.TableRows` holding rows):
    ``--yes`` skips the question; with no terminal on standard input it is a usage error."""
    if not tables or yes:
        return
    listing = ", ".join(f"{t.table} ({t.rows} row{'s' if t.rows != 1 else ''})"
                        for t in tables)
    question = f"downgrading to {revision!r} drops tables holding rows: {listing}"
    if not sys.stdin.isatty():
        raise click.UsageError(f"{question}; refusing without a terminal to ask on: add --yes "
                               "to drop them (back the database up first)")
    click.confirm(f"{question}. Their rows are lost. Drop them?", abort=True, err=True)


@db.command()
def current() -> None:
    """Print the schema revision of the database and the one this tracker needs."""
    from tracker.store import schema

    engine, _ = _engine()
    revision = schema.current(engine)
    head = schema.head()
    state = "up to date" if revision == head else "run `tracker db upgrade`"
    click.echo(f"{_where(engine)}: {revision or 'no schema'} (head {head}: {state})")


# ----------------------------------------------------------------------------- experiments
@main.group()
def experiments() -> None:
    """Register and inspect experiments."""


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
MAX_DURATION = timedelta(days=365)
"""The longest ``--window`` or ``--every`` accepted."""


def _duration(text: str, option: str | None = None,
              maximum: timedelta = MAX_DURATION) -> timedelta:
    """A positive duration such as ``30m``, ``24h`` or ``7d``, at most ``maximum``.

    Anything else is a usage error (exit 2) that names ``option`` and the accepted form.
    """
    form = f"a positive number with a unit (s, m, h, d) up to {maximum.days}d, e.g. 30m, 24h, 7d"
    match = _DURATION.match(text.strip())
    if not match:
        raise click.BadParameter(f"{text!r}: expected {form}", param_hint=option)
    unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[match.group(2)]
    amount = float(match.group(1))
    if amount > maximum / timedelta(**{unit: 1}):  # checked before timedelta can overflow
        raise click.BadParameter(f"{text!r}: expected {form}", param_hint=option)
    duration = timedelta(**{unit: amount})
    if duration <= timedelta(0):  # zero, or below timedelta's microsecond
        raise click.BadParameter(f"{text!r}: expected {form}", param_hint=option)
    return duration


def _pairs(values: tuple[str, ...], option: str, form: str, *, default: float | None = None,
           positive: bool = False) -> dict[str, float]:
    """``NAME=NUMBER`` options as a dict, in the order given.

    Each NAME is non-empty and given once; each NUMBER is finite and >= 0 (> 0 when
    ``positive``). A bare ``NAME`` takes ``default`` (an error when there is none). A bad
    value is a usage error naming ``option`` and the accepted ``form``.
    """
    out: dict[str, float] = {}
    bound = "> 0" if positive else ">= 0"
    for value in values:
        name, sep, text = value.partition("=")
        name = name.strip()
        if not name or (not sep and default is None):
            raise click.BadParameter(f"{value!r}: expected {form}", param_hint=option)
        try:
            number = float(text) if sep else float(default)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < 0 or (positive and number == 0):
            raise click.BadParameter(f"{value!r}: expected {form} with a finite number {bound}",
                                     param_hint=option)
        if name in out:
            raise click.BadParameter(f"{form.partition('=')[0].lower()} {name!r} given "
                                     "twice; give each once",
                                     param_hint=option)
        out[name] = number
    return out


@contextmanager
def _options(**fields: str) -> Iterator[None]:
    """A library :class:`ValidationError` about a field that one of the command's options
    feeds (``field="--option"``) becomes a usage error on that option (exit 2)."""
    try:
        yield
    except ValidationError as error:
        if error.field not in fields:
            raise
        raise click.BadParameter(error.reason, param_hint=fields[error.field]) from None


GUARDRAIL_FORM = "METRIC@K=LOSS (e.g. ndcg@10=0.02)"
_PRIMARY_HELP = ("A primary (success) metric, METRIC@K or METRIC for those without a cutoff "
                 "(repeatable).")
_GUARDRAIL_HELP = ("A guardrail with the relative loss it tolerates, METRIC@K=LOSS, e.g. "
                   "song_clicks=0.05 (repeatable).")


@experiments.command("create")
@click.argument("key")
@click.option("--arm", "arms", multiple=True, required=True,
              help="ARM=WEIGHT (repeat for each arm; the weight defaults to 1).")
@click.option("--control", help="The control arm (default: the first --arm).")
@click.option("--window", default="24h", show_default=True,
              help="Attribution window: 30m, 24h, 7d, ...")
@click.option("--relevance", "relevance", multiple=True,
              help="EVENT=GRADE (repeat); without it every event is grade 1.")
@click.option("--unknown-events", type=click.Choice(["reject", "zero"]), default="reject",
              show_default=True, help="Event types missing from --relevance: reject or grade 0.")
@click.option("--name", help="Display name (default: the key).")
@click.option("--description", default="")
@click.option("--timezone", default="UTC", show_default=True,
              help="IANA time zone of the reporting days.")
@click.option("--cutoffs", default="5,10,20", show_default=True, help="k values reported.")
@click.option("--status", type=click.Choice(["draft", "running", "stopped", "archived"]),
              default="running", show_default=True)
@click.option("--primary", multiple=True, metavar="METRIC@K", help=_PRIMARY_HELP)
@click.option("--guardrail", "guardrails", multiple=True, metavar="METRIC@K=LOSS",
              help=_GUARDRAIL_HELP)
@click.option("--exist-ok", is_flag=True,
              help="Succeed without changes when KEY already exists (for scripts).")
def experiments_create(key, arms, control, window, relevance, unknown_events, name,
                       description, timezone, cutoffs, status, primary, guardrails,
                       exist_ok) -> None:
    """Register experiment KEY with its arms and, optionally, its metric roles (the other
    metrics are secondary)."""
    from tracker.errors import AlreadyExists
    from tracker.sdk import Tracker

    try:
        cutoff_list = [int(k) for k in cutoffs.split(",") if k.strip()]
    except ValueError:
        raise click.BadParameter(f"{cutoffs!r}: expected whole numbers like 5,10,20",
                                 param_hint="--cutoffs") from None
    weights = _pairs(arms, "--arm", "ARM=WEIGHT", default=1.0, positive=True)
    grades = _pairs(relevance, "--relevance", "EVENT=GRADE", default=1.0)
    attribution_window = _duration(window, "--window")
    with Tracker() as t, _options(key="KEY", arms="--arm", control="--control",
                                  attribution_window="--window", relevance="--relevance",
                                  timezone="--timezone", cutoffs="--cutoffs", name="--name"):
        try:
            created = t.create_experiment(
                key, weights, control=control, attribution_window=attribution_window,
                relevance=grades or None, name=name,
                description=description, timezone=timezone, cutoffs=cutoff_list,
                unknown_events=unknown_events, status=status, primary=primary,
                guardrails=_pairs(guardrails, "--guardrail", GUARDRAIL_FORM))
        except AlreadyExists:
            if not exist_ok:
                raise
            click.echo(f"experiment {key!r} already exists; left unchanged")
            return
    click.echo(f"created experiment {created.key!r} with arms "
               f"{', '.join(a.key for a in created.arms)} (control {created.control!r})")


@experiments.command("update")
@click.argument("key")
@click.option("--primary", multiple=True, metavar="METRIC@K",
              help=_PRIMARY_HELP + " Replaces the primary metrics.")
@click.option("--guardrail", "guardrails", multiple=True, metavar="METRIC@K=LOSS",
              help=_GUARDRAIL_HELP + " Replaces the guardrails.")
@click.option("--clear-roles", is_flag=True,
              help="Remove every role (the report's defaults apply again).")
@click.option("--name", help="New display name.")
@click.option("--description", help="New description.")
@click.option("--ends-at", metavar="ISO", help="New end instant, e.g. 2026-12-01T00:00:00Z.")
def experiments_update(key, primary, guardrails, clear_roles, name, description,
                       ends_at) -> None:
    """Change experiment KEY's metric roles, name, description or end. Options left out
    stay as they are; arms, window, relevance, cutoffs and time zone cannot change."""
    from tracker.sdk import Tracker

    if clear_roles and (primary or guardrails):
        raise click.UsageError("give --clear-roles or --primary/--guardrail, not both")
    if clear_roles:
        primary_list, guardrail_map = [], {}
    else:
        primary_list = list(primary) if primary else None
        guardrail_map = _pairs(guardrails, "--guardrail", GUARDRAIL_FORM) if guardrails else None
    with Tracker() as t:
        updated = t.update_experiment(key, primary=primary_list, guardrails=guardrail_map,
                                      name=name, description=description, ends_at=ends_at)
    click.echo(f"updated experiment {key!r}; roles: {_roles_text(updated.roles)}")


def _roles_text(roles) -> str:
    if roles is None:
        return "none declared (the report's defaults apply)"
    guards = ", ".join(f"{n} (loss {v:g})" for n, v in roles.guardrails.items())
    return f"primary {', '.join(roles.primary) or '-'}; guardrails {guards or '-'}"


@experiments.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
def experiments_list(fmt: str) -> None:
    """List every experiment."""
    from tracker.sdk import Tracker

    with Tracker() as t:
        found = t.experiments()
    if fmt == "json":
        click.echo(json.dumps([e.to_dict() for e in found], indent=2))
        return
    if not found:
        click.echo("no experiments yet: create one with `tracker experiments create`")
        return
    rows = [("KEY", "STATUS", "ARMS", "CONTROL", "WINDOW", "CREATED")]
    rows += [(e.key, e.status, ",".join(a.key for a in e.arms), e.control,
              str(e.attribution_window), e.created_at.strftime("%Y-%m-%d %H:%M")) for e in found]
    _table(rows)


@experiments.command("show")
@click.argument("key")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
def experiments_show(key: str, fmt: str) -> None:
    """Show one experiment's settings."""
    from tracker.sdk import Tracker

    with Tracker() as t:
        found = t.experiment(key)
    data = found.to_dict()
    if fmt == "json":
        click.echo(json.dumps(data, indent=2))
        return
    total = sum(a.weight for a in found.arms)
    for name, value in data.items():
        if name == "arms":
            value = ", ".join(f"{a.key} ({a.weight / total:.1%})" for a in found.arms)
        elif name == "roles":
            value = _roles_text(found.roles)
        elif isinstance(value, dict):
            value = ", ".join(f"{k}={v:g}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        click.echo(f"{name:>28}: {value}")


@experiments.command("catalog")
@click.argument("key")
@click.argument("items_file", metavar="FILE", required=False, type=click.File("r"))
@click.option("--clear", is_flag=True, help="Remove the declared catalog.")
def experiments_catalog(key: str, items_file, clear: bool) -> None:
    """Declare the item catalog of experiment KEY: one item id per line of FILE (- for
    standard input), replacing any declared before. Coverage is then over these items plus
    any seen in the logs; without one, over the items seen. Without FILE or --clear, print
    the declared catalog's size."""
    from tracker.sdk import Tracker

    if clear and items_file is not None:
        raise click.UsageError("give FILE or --clear, not both")
    with Tracker() as t:
        if items_file is None and not clear:
            size = len(t.catalog(key))
            click.echo(f"{key}: {size} declared catalog items" if size else
                       f"{key}: no declared catalog (coverage counts the items seen)")
            return
        items = None if clear else (line.strip() for line in items_file if line.strip())
        try:
            size = t.declare_catalog(key, items)
        except UnicodeDecodeError as error:  # nothing was declared: the file is read first
            raise click.BadParameter(f"{items_file.name}: not UTF-8 text (byte {error.start} "
                                     "of a block); save it as UTF-8, one item id per line",
                                     param_hint="FILE") from None
    done = "catalog removed" if clear else f"{size} catalog items declared"
    click.echo(f"{key}: {done}; the next `tracker rollup` recomputes its days")


def _table(rows: list[tuple]) -> None:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


# ----------------------------------------------------------------------------- import
@main.group("import")
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
        with click.progressbar(length=records.size_hint(), label=f"importing {kind}",
                               file=sys.stderr) as bar:
            result = log(records, progress=bar.update)
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
        click.echo(f"error: {problem}", err=True)
    click.echo(result.summary() + ("; nothing stored" if error else ""))
    for rejection in result.rejected[:show_rejected]:
        click.echo(f"  rejected {records.describe(rejection)}")
    if len(result.rejected) > show_rejected:
        click.echo(f"  ... and {len(result.rejected) - show_rejected} more rejected "
                   "(--show-rejected N or --json for all)")
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


def _import_command(kind: str, one: str, fields: str):
    @click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
    @click.option("--format", "fmt", type=click.Choice(["csv", "json", "jsonl", "parquet"]),
                  help="File format (default: from the extension).")
    @click.option("--show-rejected", default=20, show_default=True, type=click.IntRange(min=0),
                  help="How many rejected records to print.")
    @click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
    def command(file: Path, fmt: str | None, show_rejected: int, as_json: bool) -> None:
        _import(kind, file, fmt, show_rejected, as_json)

    command.__doc__ = _IMPORT_HELP.format(kind=kind, one=one, fields=fields)
    return import_.command(kind)(command)


_import_command("impressions", "impression", "impression_id, experiment, arm, user_id, items, "
                "served_at, and optionally scores, baseline_items, context")
_import_command("interactions", "interaction", "event_id, user_id, item_id, event, "
                "occurred_at, and optionally value, impression_id")



# ---------------------------------------------------------------------------- rollup
def _progress_bar(stage: str, done: int, total: int, day) -> None:
    width = 30
    filled = width * done // max(total, 1)
    label = "days" if stage == "day" else "cumulative"
    click.echo(f"\r  {label:<10} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {day}",
               nl=done == total, err=True)


def _every(_ctx, _param, value: str | None) -> float | None:
    """``--every``: a duration (see :func:`_duration`) in seconds, parsed before anything runs;
    a bad one is a usage error naming the option ("Invalid value for '--every'")."""
    return None if value is None else _duration(value).total_seconds()


@main.command("rollup")
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

    engine, settings = _engine()

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


# ---------------------------------------------------------------------------- report
def _level(_ctx, _param, value: float) -> float:
    """``--level``: a confidence level strictly between 0 and 1 (95 reads as a percentage)."""
    if 0 < value < 1:
        return value
    hint = f"; did you mean {value / 100:g}?" if 1 < value < 100 else ""
    raise click.BadParameter(f"{value:g}: expected a confidence level strictly between 0 and 1, "
                             f"e.g. 0.95{hint}")


@main.command("report")
@click.argument("experiment")
@click.option("--day", "day", type=click.DateTime(["%Y-%m-%d"]),
              help="Report as of this day (default: the latest day whose results are final).")
@click.option("--daily", is_flag=True,
              help="That day alone instead of cumulative from the experiment's start.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True)
@click.option("--level", type=float, default=0.95, show_default=True, callback=_level,
              help="Confidence level, strictly between 0 and 1.")
@click.option("--sequential", is_flag=True,
              help="Always-valid intervals and p-values (for daily peeking).")
@click.option("--correction", type=click.Choice(["holm", "bh"]), default="holm",
              show_default=True, help="Multiple-comparison correction over primary metrics.")
@click.option("--primary", multiple=True, metavar="METRIC@K",
              help="A primary metric for this report (repeatable; replaces the experiment's "
                   "declared primaries; default: those, else ndcg and hit_rate at the middle "
                   "k).")
@click.option("--guardrail", "guardrails", multiple=True, metavar="METRIC@K=LOSS",
              help="A guardrail with the relative loss it tolerates, e.g. "
                   "song_clicks=0.05 (one-sided non-inferiority test; repeatable; replaces "
                   "the experiment's declared guardrails for this report).")
@click.option("--target-effect", type=float, default=0.05, show_default=True,
              help="The relative effect each primary must be able to detect (0.05 = 5%): "
                   "while a primary's minimum detectable effect is larger, an arm without a "
                   "significant result keeps running.")
@click.option("--metric", "only_metrics", multiple=True, metavar="NAME",
              help="Show only this metric, e.g. ndcg or song_clicks (repeatable; names: "
                   "the metric catalogue).")
@click.option("--k", "only_ks", multiple=True, type=click.IntRange(min=1), metavar="K",
              help="Show only this cutoff (repeatable); metrics without one stay.")
def report_cmd(experiment: str, day, daily: bool, fmt: str, level: float, sequential: bool,
               correction: str, primary: tuple[str, ...], guardrails: tuple[str, ...],
               only_metrics: tuple[str, ...], only_ks: tuple[int, ...],
               target_effect: float) -> None:
    """Scorecard of EXPERIMENT: first the decision per treatment arm (ship, do not ship, keep
    running, no detectable effect) and the health checklist (SRM, sample size, crossover,
    data freshness, rollup, provisional days); then each arm's mean with its interval, lift
    against control with its interval and p-value, and significance after correction. Rows
    are grouped by role (primary, guardrails, secondary, as declared on the experiment or
    given here), then as online, ranking and beyond accuracy; ↓ marks a metric where lower
    is better."""
    from tracker.errors import ValidationError
    from tracker.report import render_table, report, select

    margins = _pairs(guardrails, "--guardrail", GUARDRAIL_FORM)
    engine, _ = _engine()
    with _options(as_of="--day", primary="--primary/--guardrail",
                  target_effect="--target-effect"):
        card = report(engine, experiment, cumulative=not daily,
                      as_of=day.date() if day else None, level=level,
                      intervals="sequential" if sequential else "fixed_horizon",
                      correction=correction, primary=primary or None,
                      guardrails=margins or None, target_effect=target_effect)
    try:
        card = select(card, only_metrics, only_ks)
    except ValidationError as error:
        raise click.BadParameter(error.reason, param_hint=f"--{error.field}") from None
    if fmt == "json":
        click.echo(json.dumps(card.to_dict(), indent=2))
    elif fmt == "csv":
        click.echo(card.to_csv(), nl=False)
    else:
        click.echo(render_table(card))


# ---------------------------------------------------------------------------- demo
@main.command("demo")
@click.option("--days", default=14, show_default=True, type=click.IntRange(1, 366),
              help="Simulated days.")
@click.option("--users", default=3000, show_default=True, type=click.IntRange(min=1),
              help="Simulated users.")
@click.option("--seed", default=7, show_default=True, type=click.IntRange(min=0))
def demo_cmd(days: int, users: int, seed: int) -> None:
    """Simulate a 14-day recommender A/B test into the database, roll it up, print the results.

    Creates (or reuses) the database of TRACKER_DATABASE_URL (default: ./tracker.db), logs the
    simulated impressions and interactions day by day through the logging API (late events and
    retried sends included) with a rollup after each day, as a nightly job would, then prints
    the main metrics per arm and ends with the decision for each model against control
    (primaries ndcg@10 and hit_rate@10, guardrail song_clicks). Running it again stores
    nothing new.
    """
    import time

    from tracker import Tracker
    from tracker.demo import DemoConfig, load
    from tracker.report import render_decisions, render_table, report
    from tracker.rollup.engine import run_rollup
    from tracker.store import schema

    began = time.perf_counter()
    engine, settings = _engine()
    schema.upgrade(engine)
    config = DemoConfig(days=days, users=users, seed=seed)
    with Tracker(settings=settings) as tracker:
        def nightly(day) -> None:
            (summary,) = run_rollup(tracker.engine, settings, config.key)
            click.echo(f"  {day}: {summary.describe()}", err=True)

        click.echo(f"simulating {days} days of {config.key} into {_where(tracker.engine)}",
                   err=True)
        loaded = load(tracker, config, after_day=nightly)
        card = report(tracker.engine, config.key)
    click.echo(f"logged {loaded.impressions} impressions and {loaded.interactions} interactions: "
               f"{loaded.stored} stored, {loaded.duplicates} duplicates (retried sends), "
               f"{loaded.conflicts} conflicts, {loaded.rejected} rejected")
    main_metrics = tuple(f"{m}@10" for m in ("hit_rate", "precision", "recall", "ndcg", "map",
                                             "mrr", "coverage", "unexpectedness"))
    click.echo(render_table(card, only=main_metrics + ("song_clicks",), decisions=False))
    click.echo(f"\nDone in {time.perf_counter() - began:.0f} s. Results are in "
               f"{_where(engine)}: `tracker report {config.key}` for every metric, "
               "`tracker rollup` after new data.\n")
    click.echo("\n".join(render_decisions(card)))


# ---------------------------------------------------------------------------- dashboard
def dashboard_command(app: Path, host: str, port: int) -> list[str]:
    """The Streamlit command line that serves the dashboard ``app``."""
    return [sys.executable, "-m", "streamlit", "run", str(app),
            "--server.address", host, "--server.port", str(port), "--server.headless", "true",
            "--browser.gatherUsageStats", "false", "--global.developmentMode", "false"]


@main.command("dashboard")
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
               f"{mask_password(_settings().database_url)})", err=True)
    command = dashboard_command(app, host, port)
    root = str(app.parents[1])  # so that the pages can `import dashboard`
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = root if not path else f"{root}{os.pathsep}{path}"
    os.execv(command[0], command)


# ---------------------------------------------------------------------------- collector
@main.command("serve")
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
        settings = _settings().replace(**{name: value for name, value in (
            ("collector_host", host), ("collector_port", port),
            ("collector_workers", workers)) if value is not None})
    except ConfigError as error:
        raise click.BadParameter(str(error), param_hint="--host") from None
    serve(settings)


@main.group()
def keys() -> None:
    """API keys of the HTTP collector (stored only as hashes)."""


@keys.command("create")
@click.argument("name")
@click.option("--scope", type=click.Choice(["ingest", "read"]), required=True,
              help="ingest: send events; read: read experiments.")
def keys_create(name: str, scope: str) -> None:
    """Create an API key called NAME and print it (the only time it is shown)."""
    from tracker.store.db import require_current_schema, transaction
    from tracker.store.keys import create_key

    engine, _ = _engine()
    require_current_schema(engine)
    with _options(name="NAME"), transaction(engine, write=True) as conn:
        info, token = create_key(conn, name, scope)
    click.echo(f"created API key {info.key_id} ({info.name!r}, scope {info.scope}); "
               "store it now, it is not shown again:", err=True)
    click.echo(token)


@keys.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
def keys_list(fmt: str) -> None:
    """List API keys (ids, names, scopes, revocation; never the secrets)."""
    from tracker.store.db import require_current_schema, transaction
    from tracker.store.keys import list_keys

    engine, _ = _engine()
    require_current_schema(engine)
    with transaction(engine) as conn:
        found = list_keys(conn)
    if fmt == "json":
        click.echo(json.dumps([k.to_dict() for k in found], indent=2))
        return
    if not found:
        click.echo("no API keys yet: create one with `tracker keys create NAME --scope ingest`")
        return
    rows = [("ID", "NAME", "SCOPE", "CREATED", "REVOKED")]
    rows += [(k.key_id, k.name, k.scope, k.created_at.strftime("%Y-%m-%d %H:%M"),
              k.revoked_at.strftime("%Y-%m-%d %H:%M") if k.revoked_at else "-") for k in found]
    _table(rows)


@keys.command("revoke")
@click.argument("key_id")
def keys_revoke(key_id: str) -> None:
    """Revoke the API key KEY_ID (its id, or the whole key); the collector refuses it within
    TRACKER_COLLECTOR_KEY_CACHE_SECONDS."""
    from tracker.store.db import require_current_schema, transaction
    from tracker.store.keys import parse_token, revoke_key

    parsed = parse_token(key_id)
    key_id = parsed[0] if parsed else key_id
    engine, _ = _engine()
    require_current_schema(engine)
    with transaction(engine, write=True) as conn:
        info = revoke_key(conn, key_id)
    click.echo(f"revoked API key {info.key_id} ({info.name!r}) at {info.revoked_at:%Y-%m-%d %H:%M}")

if __name__ == "__main__":
    main()
