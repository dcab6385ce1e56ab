"""What the commands share: settings and engine, option parsing, usage errors, tables,
progress."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import click

from tracker.config import Settings, mask_password
from tracker.durations import format_duration  # noqa: F401 (the inverse of parse_duration)
from tracker.errors import ValidationError


def settings_from_env() -> Settings:
    """The TRACKER_* settings of the environment."""
    return Settings.from_env()


def open_engine():
    """The tracker database's engine and the settings it was opened with."""
    from tracker.store.db import create_engine

    settings = settings_from_env()
    return create_engine(settings.database_url, settings), settings


def where(engine) -> str:
    """The database URL for messages, password masked."""
    return mask_password(engine.url.render_as_string(hide_password=False))


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
MAX_DURATION = timedelta(days=365)
"""The longest ``--window`` or ``--every`` accepted."""


def parse_duration(text: str, option: str | None = None,
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


def parse_pairs(values: tuple[str, ...], option: str, form: str, *, default: float | None = None,
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
def options_for(**fields: str) -> Iterator[None]:
    """A library :class:`ValidationError` about a field that one of the command's options
    feeds (``field="--option"``) becomes a usage error on that option (exit 2)."""
    try:
        yield
    except ValidationError as error:
        if error.field not in fields:
            raise
        raise click.BadParameter(error.reason, param_hint=fields[error.field]) from None


def experiment_argument(param: str = "experiment", *, required: bool = True):
    """The experiment a command acts on, named the same in every command: the positional
    EXPERIMENT (its key), passed as ``param``."""
    return click.argument(param, metavar="EXPERIMENT" if required else "[EXPERIMENT]",
                          required=required)


class FormatChoice(click.Choice):
    """``--format``'s choices, plus older spellings (``aliases``) it still reads but does not
    list: ``table`` is ``text``."""

    def __init__(self, choices: tuple[str, ...], aliases: dict[str, str] | None = None):
        super().__init__(choices)
        self.aliases = {"table": "text", **(aliases or {})}

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.lower() in self.aliases:
            return self.aliases[value.lower()]
        return super().convert(value, param, ctx)


def format_option(*machine: str, aliases: dict[str, str] | None = None):
    """``--format``, the same option in every command that prints results: ``text`` for
    people (the default), or one of the ``machine`` formats (``json``, ``csv``)."""
    return click.option("--format", "fmt", type=FormatChoice(("text", *machine), aliases),
                        default="text", show_default=True,
                        help="Output: text for people, or " + " or ".join(machine) + ".")


def _deprecated_json(_ctx, _param, value: bool) -> bool:
    if value:
        click.echo("Warning: --json is deprecated; use --format json", err=True)
    return value


json_alias = click.option("--json", "as_json", is_flag=True, hidden=True,
                          callback=_deprecated_json,
                          help="Deprecated spelling of --format json (still read).")
"""``--json``: the older spelling of ``--format json``, kept for scripts, hidden from help."""


GUARDRAIL_FORM = "METRIC@K=LOSS (e.g. ndcg@10=0.02)"
PRIMARY_HELP = ("A primary (success) metric, METRIC@K or METRIC for those without a cutoff "
                 "(repeatable).")
GUARDRAIL_HELP = ("A guardrail with the relative loss it tolerates, METRIC@K=LOSS, e.g. "
                   "song_clicks=0.05 (repeatable).")


def print_table(headers: tuple[str, ...], rows: list[tuple]) -> None:
    """``rows`` under ``headers``, through the one table renderer (:mod:`tracker.table`)."""
    from tracker.table import Column, text_table

    click.echo(text_table([Column(h) for h in headers], rows))


class StepProgress:
    """A job's progress on standard error, ``with StepProgress(label, total) as bar:
    bar.advance(n, step)``.

    On a terminal: rich's progress bar (redrawn in place). Anywhere else (cron mail,
    container logs, a pipe): one plain line per step, ``label done/total step``, never a
    carriage return, so each step is one line of the log.
    """

    def __init__(self, label: str, total: int, *, terminal: bool | None = None):
        from rich.console import Console

        self.label, self.total, self.done = label, total, 0
        console = Console(stderr=True)
        self._bar = None
        if console.is_terminal if terminal is None else terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[step]}"),
                                 console=console)
            self._task = self._bar.add_task(label, total=total, step="")

    def __enter__(self) -> StepProgress:
        if self._bar is not None:
            self._bar.start()
        return self

    def advance(self, n: int = 1, step: object = "") -> None:
        """``n`` more units done; ``step`` names the latest one (a day, a file part)."""
        self.done += n
        if self._bar is not None:
            self._bar.update(self._task, advance=n, step=str(step))
        else:
            click.echo(f"{self.label} {self.done}/{self.total} {step}".rstrip(), err=True)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()


def confirm(question: str, yes: bool, *, action: str = "delete", lost: str = "This cannot "
            "be undone.") -> None:
    """Ask ``question`` before a destructive ``action``: ``--yes`` skips it, and without a
    terminal on standard input it is a usage error (exit 2) naming ``--yes``."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(f"{question}; refusing without a terminal to ask on: add --yes "
                               f"to {action} (back the database up first)")
    click.confirm(f"{question}. {lost} {action.capitalize()}?", abort=True, err=True)
