"""``tracker report`` and ``tracker demo``: the scorecard."""

from __future__ import annotations

import json

import click

from tracker.cli.common import (
    GUARDRAIL_FORM,
    experiment_argument,
    format_option,
    open_engine,
    options_for,
    parse_pairs,
    where,
)


def _level(_ctx, _param, value: float) -> float:
    """``--level``: a confidence level strictly between 0 and 1 (95 reads as a percentage)."""
    if 0 < value < 1:
        return value
    hint = f"; did you mean {value / 100:g}?" if 1 < value < 100 else ""
    raise click.BadParameter(f"{value:g}: expected a confidence level strictly between 0 and 1, "
                             f"e.g. 0.95{hint}")


@click.command("report")
@experiment_argument()
@click.option("--day", "day", type=click.DateTime(["%Y-%m-%d"]),
              help="Report as of this day (default: the latest day whose results are final).")
@click.option("--daily", is_flag=True,
              help="That day alone instead of cumulative from the experiment's start.")
@format_option("json", "csv")
@click.option("--level", type=float, default=0.95, show_default=True, callback=_level,
              help="Confidence level, strictly between 0 and 1.")
@click.option("--sequential/--fixed-horizon", default=None,
              help="Always-valid intervals and p-values (for daily peeking), or fixed-horizon "
                   "ones (default: the experiment's analysis plan).")
@click.option("--cuped/--no-cuped", default=None,
              help="Adjust lifts, intervals, verdicts and decisions for each user's "
                   "behaviour before first exposure (CUPED), where the rollup stored it "
                   "(default: the experiment's analysis plan).")
@click.option("--correction", type=click.Choice(["holm", "bh"]), default=None,
              help="Multiple-comparison correction over primary metrics (default: the "
                   "experiment's analysis plan).")
@click.option("--primary", multiple=True, metavar="METRIC@K",
              help="A primary metric for this report (repeatable; replaces the experiment's "
                   "declared primaries; default: those, else ndcg and hit_rate at the middle "
                   "k).")
@click.option("--guardrail", "guardrails", multiple=True, metavar="METRIC@K=LOSS",
              help="A guardrail with the relative loss it tolerates, e.g. "
                   "song_clicks=0.05 (one-sided non-inferiority test; repeatable; replaces "
                   "the experiment's declared guardrails for this report).")
@click.option("--target-effect", type=float, default=None,
              help="The relative effect each primary must be able to detect (0.05 = 5%): "
                   "while a primary's minimum detectable effect is larger, an arm without a "
                   "significant result keeps running (default: the experiment's analysis "
                   "plan).")
@click.option("--metric", "only_metrics", multiple=True, metavar="NAME",
              help="Show only this metric, e.g. ndcg or song_clicks (repeatable; names: "
                   "the metric catalogue).")
@click.option("--k", "only_ks", multiple=True, type=click.IntRange(min=1), metavar="K",
              help="Show only this cutoff (repeatable); metrics without one stay.")
@click.option("--segment", metavar="DIM", default=None,
              help="The results per slice of this declared dimension (exploratory: "
                   "verdicts adjusted across its slices, per-slice sample ratio, "
                   "heterogeneity of each primary).")
def report_cmd(experiment: str, day, daily: bool, fmt: str, level: float,
               sequential: bool | None, cuped: bool | None, correction: str | None,
               primary: tuple[str, ...], guardrails: tuple[str, ...],
               only_metrics: tuple[str, ...], only_ks: tuple[int, ...],
               target_effect: float | None, segment: str | None) -> None:
    """Scorecard of EXPERIMENT: first the decision per treatment arm (ship, do not ship, keep
    running, no detectable effect) and the health checklist (SRM, sample size, crossover,
    data freshness, rollup, provisional days); then each arm's mean with its interval, lift
    against control with its interval and p-value, and significance after correction. Rows
    are grouped by role (primary, guardrails, secondary, as declared on the experiment or
    given here), then as online, ranking and beyond accuracy; ↓ marks a metric where lower
    is better. The experiment's analysis plan decides the interval mode, CUPED, the
    correction and the target effect; an option that departs from it makes the report an
    exploratory view, and the report says so."""
    from tracker.errors import ValidationError
    from tracker.report import render_table, report, select

    margins = parse_pairs(guardrails, "--guardrail", GUARDRAIL_FORM)
    engine, _ = open_engine()
    if segment is not None:
        _segment_report(engine, experiment, segment, fmt, only_metrics, only_ks,
                        cumulative=not daily, as_of=day.date() if day else None,
                        level=level, cuped=cuped, correction=correction,
                        intervals=None if sequential is None
                        else "sequential" if sequential else "fixed_horizon",
                        primary=primary or None, guardrails=margins or None,
                        target_effect=target_effect)
        return
    with options_for(as_of="--day", primary="--primary/--guardrail",
                  target_effect="--target-effect"):
        card = report(engine, experiment, cumulative=not daily,
                      as_of=day.date() if day else None, level=level,
                      intervals=None if sequential is None
                      else "sequential" if sequential else "fixed_horizon",
                      cuped=cuped, correction=correction, primary=primary or None,
                      guardrails=margins or None, target_effect=target_effect)
    planned = None
    if card.exploratory and card.cumulative and fmt not in ("json", "csv"):
        with options_for(as_of="--day"):  # the plan's own decision, same day and roles
            planned = report(engine, experiment, as_of=card.as_of, level=level,
                             primary=primary or None, guardrails=margins or None)
    try:
        card = select(card, only_metrics, only_ks)
    except ValidationError as error:
        raise click.BadParameter(error.reason, param_hint=f"--{error.field}") from None
    if fmt == "json":
        click.echo(json.dumps(card.to_dict(), indent=2))
    elif fmt == "csv":
        click.echo(card.to_csv(), nl=False)
    else:
        click.echo(render_table(card, planned=planned))


def _segment_report(engine, experiment: str, segment: str, fmt: str,
                    only_metrics: tuple[str, ...], only_ks: tuple[int, ...],
                    **options) -> None:
    """``tracker report EXPERIMENT --segment DIM``: a block per slice (text), or one row per
    metric × arm × slice (JSON, CSV)."""
    from tracker.errors import ValidationError
    from tracker.report import render_segments, segment_report
    from tracker.report.card import filter_rows
    from tracker.report.rows import metric_name

    with options_for(as_of="--day", primary="--primary/--guardrail",
                     target_effect="--target-effect", segment="--segment"):
        found = segment_report(engine, experiment, segment, **options)
    try:
        rows = filter_rows(found.metrics, only_metrics, only_ks)
    except ValidationError as error:
        raise click.BadParameter(error.reason, param_hint=f"--{error.field}") from None
    if fmt == "json":
        click.echo(json.dumps(dict(found.to_dict(), metrics=rows), indent=2, default=str))
    elif fmt == "csv":
        click.echo(found.to_frame(only_metrics, only_ks).to_csv(index=False), nl=False)
    else:
        names = {metric_name(r["metric"], r["k"]) for r in rows}
        click.echo(render_segments(found, only=tuple(names)))


# ---------------------------------------------------------------------------- demo
@click.command("demo")
@click.option("--days", default=14, show_default=True, type=click.IntRange(1, 366),
              help="Simulated days.")
@click.option("--users", default=3000, show_default=True, type=click.IntRange(min=1),
              help="Simulated users.")
@click.option("--seed", default=3, show_default=True, type=click.IntRange(min=0))
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
    engine, settings = open_engine()
    schema.upgrade(engine)
    config = DemoConfig(days=days, users=users, seed=seed)
    with Tracker(settings=settings) as tracker:
        def nightly(day) -> None:
            (summary,) = run_rollup(tracker.engine, settings, config.key)
            click.echo(f"  {day}: {summary.describe()}", err=True)

        click.echo(f"simulating {days} days of {config.key} into {where(tracker.engine)}",
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
               f"{where(engine)}: `tracker report {config.key}` for every metric, "
               "`tracker rollup` after new data.\n")
    click.echo("\n".join(render_decisions(card)))

