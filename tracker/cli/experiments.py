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
@click.option("--exist-ok", is_flag=True,
              help="Succeed without changes when EXPERIMENT already exists (for scripts).")
def experiments_create(key, arms, control, window, relevance, unknown_events, name,
                       description, timezone, cutoffs, status, primary, guardrails,
                       cuped_days, exist_ok) -> None:
    """Register EXPERIMENT (its key) with its arms and, optionally, its metric roles (the other
    metrics are secondary)."""
    from tracker.sdk import Tracker

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
                                  cuped_days="--cuped-days"):
        existed = exist_ok and any(e.key == key for e in t.experiments(include_archived=True))
        # with --exist-ok a stored experiment that defines something else (arms, split,
        # window, relevance, ...) is still an error naming the differences
        created = t.create_experiment(
            key, weights, control=control, attribution_window=attribution_window,
            relevance=grades or None, name=name,
            description=description, timezone=timezone, cutoffs=cutoff_list,
            unknown_events=unknown_events, status=status, primary=primary,
            guardrails=parse_pairs(guardrails, "--guardrail", GUARDRAIL_FORM),
            exist_ok=exist_ok, cuped_days=cuped_days)
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
def experiments_update(key, primary, guardrails, clear_roles, name, description,
                       ends_at, cuped_days) -> None:
    """Change EXPERIMENT's metric roles, name, description or end. Options left out
    stay as they are; arms, window, relevance, cutoffs and time zone cannot change."""
    from tracker.sdk import Tracker

    if clear_roles and (primary or guardrails):
        raise click.UsageError("give --clear-roles or --primary/--guardrail, not both")
    if clear_roles:
        primary_list, guardrail_map = [], {}
    else:
        primary_list = list(primary) if primary else None
        guardrail_map = (parse_pairs(guardrails, "--guardrail", GUARDRAIL_FORM)
                         if guardrails else None)
    with Tracker() as t, options_for(cuped_days="--cuped-days"):
        updated = t.update_experiment(key, primary=primary_list, guardrails=guardrail_map,
                                      name=name, description=description, ends_at=ends_at,
                                      cuped_days=cuped_days)
    click.echo(f"updated experiment {key!r}; roles: {_roles_text(updated.roles)}")


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
        elif name == "attribution_window_seconds":  # as given: 24h
            name, value = "attribution_window", format_duration(found.attribution_window)
        elif isinstance(value, dict):
            value = ", ".join(f"{k}={v:g}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        click.echo(f"{name:>28}: {value}")


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

