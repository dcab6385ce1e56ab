"""``tracker experiments``: register, change and inspect experiments."""

from __future__ import annotations

import json

import click

from tracker.cli.common import (
    GUARDRAIL_FORM,
    GUARDRAIL_HELP,
    PRIMARY_HELP,
    experiment_argument,
    format_duration,
    format_option,
    options_for,
    parse_duration,
    parse_pairs,
    print_table,
)
from tracker.store.experiments import DEFAULT_MAX_LEVELS

INTERVALS_HELP = ("Analysis plan: fixed-horizon intervals, or sequential (always-valid, for "
                  "looking every day).")
CUPED_HELP = "Analysis plan: adjust comparisons for pre-exposure behaviour (CUPED)."
CORRECTION_HELP = "Analysis plan: multiple-comparison correction over the primary metrics."
TARGET_HELP = ("Analysis plan: the relative effect each primary must be able to detect "
               "(0.05 = 5%).")
SEGMENT_HELP = ("A dimension to slice results by (repeat): NAME or NAME:user, the user's "
                "value at first exposure (a context key, or built in: cohort, new or "
                "returning; activity, terciles of pre-period interactions), or NAME:list, "
                "each served list's own context value (e.g. surface:list). Both engines "
                "slice.")
LEVELS_HELP = "Slices per dimension: values beyond the most frequent fold into (other)."


def _plan_options(create: bool):
    """The analysis plan's options: with defaults on ``create``, unset (unchanged) on
    ``update``."""
    def wrap(command):
        for option in reversed([
            click.option("--intervals", type=click.Choice(["fixed_horizon", "sequential"]),
                         default="fixed_horizon" if create else None, show_default=create,
                         help=INTERVALS_HELP),
            click.option("--cuped/--no-cuped", default=True if create else None,
                         show_default=create, help=CUPED_HELP),
            click.option("--correction", type=click.Choice(["holm", "bh"]),
                         default="holm" if create else None, show_default=create,
                         help=CORRECTION_HELP),
            click.option("--target-effect", type=float, default=0.05 if create else None,
                         show_default=create, help=TARGET_HELP),
        ]):
            command = option(command)
        return command
    return wrap


@click.group()
def experiments() -> None:
    """Register and inspect experiments."""



@experiments.command("create")
@experiment_argument("key")
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
@click.option("--primary", multiple=True, metavar="METRIC@K", help=PRIMARY_HELP)
@click.option("--guardrail", "guardrails", multiple=True, metavar="METRIC@K=LOSS",
              help=GUARDRAIL_HELP)
@click.option("--cuped-days", type=int, default=14, show_default=True,
              help="Days of each user's history before first exposure that the CUPED "
                   "adjustment uses (0: none).")
@click.option("--ends-at", metavar="ISO",
              help="Planned end (analysis plan), e.g. 2026-12-01T00:00:00Z.")
@_plan_options(create=True)
@click.option("--segment", "segments", multiple=True, metavar="NAME[:user|:list]",
              help=SEGMENT_HELP)
@click.option("--max-levels", type=int,
              help=LEVELS_HELP + f" With --segment.  [default: {DEFAULT_MAX_LEVELS}]")
@click.option("--exist-ok", is_flag=True,
              help="Succeed without changes when EXPERIMENT already exists (for scripts).")
def experiments_create(key, arms, control, window, relevance, unknown_events, name,
                       description, timezone, cutoffs, status, primary, guardrails,
                       cuped_days, ends_at, intervals, cuped, correction, target_effect,
                       segments, max_levels, exist_ok) -> None:
    """Register EXPERIMENT (its key) with its arms and, optionally, its metric roles (the other
    metrics are secondary) and its analysis plan (interval mode, CUPED, correction, target
    effect, planned end), which the report, the list and the dashboard decide by."""
    from datetime import UTC, datetime

    from tracker.sdk import Tracker

    end = None
    if ends_at:
        try:
            end = datetime.fromisoformat(ends_at)
        except ValueError:
            raise click.BadParameter(f"{ends_at!r}: expected an ISO 8601 date-time, e.g. "
                                     "2026-12-01T00:00:00Z", param_hint="--ends-at") from None
        end = end if end.tzinfo else end.replace(tzinfo=UTC)

    try:
        cutoff_list = [int(k) for k in cutoffs.split(",") if k.strip()]
    except ValueError:
        raise click.BadParameter(f"{cutoffs!r}: expected whole numbers like 5,10,20",
                                 param_hint="--cutoffs") from None
    weights = parse_pairs(arms, "--arm", "ARM=WEIGHT", default=1.0, positive=True)
    grades = parse_pairs(relevance, "--relevance", "EVENT=GRADE", default=1.0)
    attribution_window = parse_duration(window, "--window")
    with Tracker() as t, options_for(key="EXPERIMENT", arms="--arm", control="--control",
                                  attribution_window="--window", relevance="--relevance",
                                  timezone="--timezone", cutoffs="--cutoffs", name="--name",
                                  cuped_days="--cuped-days", ends_at="--ends-at",
                                  target_effect="--target-effect", segments="--segment",
                                  max_levels="--max-levels"):
        existed = exist_ok and any(e.key == key for e in t.experiments(include_archived=True))
        # with --exist-ok a stored experiment that defines something else (arms, split,
        # window, relevance, ...) is still an error naming the differences
        created = t.create_experiment(
            key, weights, control=control, attribution_window=attribution_window,
            relevance=grades or None, name=name,
            description=description, timezone=timezone, cutoffs=cutoff_list,
            unknown_events=unknown_events, status=status, primary=primary,
            guardrails=parse_pairs(guardrails, "--guardrail", GUARDRAIL_FORM),
            exist_ok=exist_ok, cuped_days=cuped_days, ends_at=end, intervals=intervals,
            cuped=cuped, correction=correction, target_effect=target_effect,
            segments=segments, max_levels=max_levels)
        if existed:
            click.echo(f"experiment {key!r} already exists; left unchanged")
            return
    click.echo(f"created experiment {created.key!r} with arms "
               f"{', '.join(a.key for a in created.arms)} (control {created.control!r})")


@experiments.command("update")
@experiment_argument("key")
@click.option("--primary", multiple=True, metavar="METRIC@K",
              help=PRIMARY_HELP + " Replaces the primary metrics.")
@click.option("--guardrail", "guardrails", multiple=True, metavar="METRIC@K=LOSS",
              help=GUARDRAIL_HELP + " Replaces the guardrails.")
@click.option("--clear-roles", is_flag=True,
              help="Remove every role (the report's defaults apply again).")
@click.option("--name", help="New display name.")
@click.option("--description", help="New description.")
@click.option("--ends-at", metavar="ISO", help="New end instant, e.g. 2026-12-01T00:00:00Z.")
@click.option("--cuped-days", type=int,
              help="New CUPED pre-exposure window in days (0: no adjustment); the next "
                   "rollup recomputes every day.")
@_plan_options(create=False)
@click.option("--segment", "segments", multiple=True, metavar="NAME[:user|:list]",
              help=SEGMENT_HELP + " Replaces the declared dimensions; the next rollup "
                   "recomputes every day.")
@click.option("--clear-segments", is_flag=True, help="Remove every declared dimension.")
@click.option("--max-levels", type=int,
              help=LEVELS_HELP + " Alone: for the dimensions already declared.")
def experiments_update(key, primary, guardrails, clear_roles, name, description,
                       ends_at, cuped_days, intervals, cuped, correction,
                       target_effect, segments, clear_segments, max_levels) -> None:
    """Change EXPERIMENT's metric roles, name, description, planned end or analysis plan
    (each change of the plan is recorded with its time: `experiments show`). Options left
    out stay as they are; arms, window, relevance, cutoffs and time zone cannot change."""
    from tracker.sdk import Tracker

    if clear_roles and (primary or guardrails):
        raise click.UsageError("give --clear-roles or --primary/--guardrail, not both")
    if clear_segments and (segments or max_levels is not None):
        raise click.UsageError("give --clear-segments or --segment/--max-levels, not both")
    if clear_roles:
        primary_list, guardrail_map = [], {}
    else:
        primary_list = list(primary) if primary else None
        guardrail_map = (parse_pairs(guardrails, "--guardrail", GUARDRAIL_FORM)
                         if guardrails else None)
    declared = [] if clear_segments else (list(segments) if segments else None)
    with Tracker() as t, options_for(cuped_days="--cuped-days", ends_at="--ends-at",
                                     target_effect="--target-effect", segments="--segment",
                                     max_levels="--max-levels"):
        updated = t.update_experiment(key, primary=primary_list, guardrails=guardrail_map,
                                      name=name, description=description, ends_at=ends_at,
                                      cuped_days=cuped_days, intervals=intervals, cuped=cuped,
                                      correction=correction, target_effect=target_effect,
                                      segments=declared, max_levels=max_levels)
    click.echo(f"updated experiment {key!r}; roles: {_roles_text(updated.roles)}; "
               f"plan: {_plan_text(updated)}; segments: {_segments_text(updated.segments)}")


def _plan_text(info) -> str:
    end = info.planned_end.isoformat() if info.planned_end else "none"
    return f"{info.plan.describe()}, planned end {end}"


def _segments_text(segments) -> str:
    return ", ".join(s.describe() for s in segments) if segments else "none"


def _roles_text(roles) -> str:
    if roles is None:
        return "none declared (the report's defaults apply)"
    guards = ", ".join(f"{n} (loss {v:g})" for n, v in roles.guardrails.items())
    return f"primary {', '.join(roles.primary) or '-'}; guardrails {guards or '-'}"


@experiments.command("list")
@format_option("json")
@click.option("--all", "include_archived", is_flag=True, help="Include archived experiments.")
def experiments_list(fmt: str, include_archived: bool) -> None:
    """List the experiments (archived ones with --all)."""
    from tracker.sdk import Tracker

    with Tracker() as t:
        found = t.experiments(include_archived=include_archived)
    if fmt == "json":
        click.echo(json.dumps([e.to_dict() for e in found], indent=2))
        return
    if not found:
        click.echo("no experiments yet: create one with `tracker experiments create`")
        return
    print_table(("KEY", "STATUS", "ARMS", "CONTROL", "WINDOW", "CREATED"),
                [(e.key, e.status, ",".join(a.key for a in e.arms), e.control,
                  format_duration(e.attribution_window), e.created_at.strftime("%Y-%m-%d %H:%M"))
                 for e in found])


@experiments.command("show")
@experiment_argument("key")
@format_option("json")
def experiments_show(key: str, fmt: str) -> None:
    """Show EXPERIMENT's settings."""
    from tracker.sdk import Tracker

    with Tracker() as t:
        found = t.experiment(key)
        history = t.plan_history(key)
    data = found.to_dict()
    if fmt == "json":
        click.echo(json.dumps({**data, "plan_history": [h.to_dict() for h in history]},
                              indent=2))
        return
    total = sum(a.weight for a in found.arms)
    for name, value in data.items():
        if name == "arms":
            value = ", ".join(f"{a.key} ({a.weight / total:.1%})" for a in found.arms)
        elif name == "roles":
            value = _roles_text(found.roles)
        elif name == "plan":
            value = _plan_text(found)
        elif name == "segments":
            value = _segments_text(found.segments)
        elif name == "attribution_window_seconds":  # as given: 24h
            name, value = "attribution_window", format_duration(found.attribution_window)
        elif isinstance(value, dict):
            value = ", ".join(f"{k}={v:g}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        click.echo(f"{name:>28}: {value}")
    for record in history:
        end = record.planned_end.isoformat() if record.planned_end else "none"
        click.echo(f"{'plan from ' + record.changed_at.strftime('%Y-%m-%d %H:%M:%S'):>28}: "
                   f"{record.plan.describe()}, planned end {end}")


@experiments.command("catalog")
@experiment_argument("key")
@click.argument("items_file", metavar="[FILE]", required=False, type=click.File("r"))
@click.option("--clear", is_flag=True, help="Remove the declared catalog.")
def experiments_catalog(key: str, items_file, clear: bool) -> None:
    """Declare the item catalog of EXPERIMENT: one item id per line of FILE (- for
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

