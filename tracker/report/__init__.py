"""The scorecard of an experiment as of a day: what ``tracker report`` prints and the
dashboard shows (both call :func:`scorecard`, so they cannot disagree).

Building it is :mod:`tracker.report.card` (with the metric rows in :mod:`~tracker.report.rows`
and health and decisions in :mod:`~tracker.report.decisions`); :mod:`~tracker.report.render`
prints it for a terminal. Everything public is importable from here.

For each metric and cutoff: every arm's mean over users with its interval; for every
treatment arm the difference against control (``lift``) and the relative lift, each with its
interval, the two-sided Welch p-value (fixed-horizon, uncorrected) and the p-value after the
correction for multiple comparisons (Holm by default) over the *primary* metrics x treatment
arms; the other metrics are reported uncorrected (``p_value_adjusted`` = ``p_value``). Which
metrics exist, their group, direction and labels come from the metric catalogue
(:mod:`tracker.metrics.catalog`); rows are ordered by group, then catalogue order, then k.

One test decides each row (:mod:`tracker.stats.compare`): Welch's test of T = C, and both
intervals invert it (Welch's for the difference, Fieller's for the relative lift), so they
exclude 0 exactly when the p-value is below 1 - level. ``decided_on`` names the interval shown
beside the verdict (the relative lift's, or the difference's when the lift's is unbounded).
They are drawn at ``interval_level``: ``level`` itself, or for a corrected primary
1 - (1 - level) p / p_adjusted, the level at which they exclude 0 exactly when
p_adjusted < 1 - level (the adjusted intervals of GrowthBook's results table). So a verdict
never stands beside an interval that contradicts it.
``intervals="sequential"`` swaps the intervals and p-values for always-valid ones (confidence
sequences) — the right choice when the scorecard is looked at every day. Set-level metrics
(coverage, gini, entropy) are one number per arm: no interval, no test, hence no verdict.

The JSON form (:meth:`Scorecard.to_dict`) is a stable interface:

- ``experiment``, ``as_of`` (ISO date), ``cumulative`` (bool), ``level``, ``intervals``
  (``fixed_horizon`` | ``sequential``), ``cuped`` (bool: the comparisons are
  regression-adjusted on the users' pre-exposure covariates, see below), ``correction``,
  ``primary`` (metric names),
  ``guardrails`` (metric name -> tolerated relative loss), ``target_effect``; the roles are the
  experiment's stored ones unless ``primary`` / ``guardrails`` override them
  (:func:`roles_for`);
- ``decisions``: per treatment arm (cumulative view only; empty for a daily one) ``arm``,
  ``outcome`` (ship | do_not_ship | keep_running | no_detectable_effect), ``reasons`` (most
  decisive first) and ``power`` per primary (``mde``, ``mde_absolute``, ``target``,
  ``powered``, ``days_to_target``, ``note``): :func:`tracker.stats.decision.decide` on the
  rows' own comparisons (see :func:`tracker.report.decisions.arm_decisions`), and
  ``population`` (per_protocol | intent_to_treat: which users' comparisons it read, see
  ``intent_to_treat``);
- ``health``: ``status`` (pass | warn | fail, the checklist's worst item) and ``checklist``
  (``[{check, status, message}]``, :func:`tracker.stats.health.health_checklist`: srm,
  sample, crossover, freshness, rollup, provisional); ``srm_p_value`` (chi-square),
  ``srm_sequential_p_value`` (anytime-valid), ``srm_flagged`` (the checklist's srm item
  fails: either p-value below 0.001; the size never gates), ``srm_deviation`` (the
  deviation in words, "control lost 0.34% of its expected users"), ``users`` and
  ``expected_share`` per arm, ``crossover_users``,
  ``crossover_share``, ``crossover_status`` (ok / warn / alert), ``provisional_days``,
  ``last_rollup`` (ISO instant), ``data_through`` (ISO instant: the newest event time the
  last rollup saw, list served or interaction answering one) and ``data_lag_hours`` (now
  minus ``data_through``, never negative; None without data). A daily view's health
  is that day's: its users, their SRM (no sequential test), its crossover;
- ``metrics``: rows with ``metric``, ``k`` (None when the metric has none), ``arm``,
  ``role`` (primary | guardrail | secondary), ``control`` (bool), ``kind`` (user | set),
  ``group`` (online | ranking | beyond_accuracy),
  ``direction`` (higher | lower: which way is better), ``users``, ``mean``, ``ci_low``,
  ``ci_high``, ``reason``; for treatment arms also ``lift``, ``lift_ci_low``,
  ``lift_ci_high``, ``relative_lift``, ``relative_lift_ci_low``, ``relative_lift_ci_high``,
  ``p_value``, ``p_value_adjusted``, ``primary``, ``decided_on`` (relative_lift |
  difference: which interval is shown beside the verdict), ``interval_level`` (the level of
  the row's intervals, see above) and ``verdict`` (better / worse / inconclusive, at the
  adjusted p-value against 1 - level and in the metric's direction; null for set-level
  metrics, which no test backs). Numbers that cannot be computed are null and ``reason``
  says why (e.g. ``zero_variance``). A metric missing from the catalogue (stored by an older
  version) has null ``group`` and ``direction`` and no
  verdict. Every row has ``variance_reduction``: the share of the lift's variance CUPED
  removed (0.0 when none, and on control and set-level rows);
- ``trends``: per primary metric and treatment arm, the slope of the lift over days since
  exposure and whether it fades (novelty) or grows (primacy): see
  :mod:`tracker.report.trends`;
- ``intent_to_treat`` (cumulative view, when some users crossed over): per treatment arm and
  primary or guardrail metric, ``per_protocol`` and ``intent_to_treat`` (each ``users``,
  ``lift``, ``relative_lift`` with its interval, ``p_value``, ``p_value_adjusted``,
  ``verdict``), ``crossover_users`` (those the arm's intent-to-treat adds: first exposed in
  it), ``disagree``, ``decides`` and ``why``. Each arm's rows count its own users
  (per-protocol); intent-to-treat adds the crossover users in the arm of their first
  exposure, and an arm whose two estimates disagree in sign or significance on any of its
  primaries or guardrails is decided on intent-to-treat (:mod:`tracker.report.crossover`).

**CUPED** (``cuped=True``, the default of :func:`report`): where the rollup stored the
covariate sums of the reported day (:func:`tracker.store.computed.covariate_table`), each
user-level comparison is :func:`tracker.stats.compare_adjusted` (or its sequential form) with
θ fitted on every arm of the metric, and the guardrail test and the decisions' power use the
adjusted arms too; the arms' own means and intervals stay unadjusted. Without pre-exposure
data the adjustment drops every covariate and the numbers are the unadjusted ones exactly.
"""


from tracker.report.card import Scorecard, report, roles_for, scorecard, select
from tracker.report.render import (
    LOWER_MARK,
    OUTCOME_LABELS,
    ROLE_LABELS,
    decision_line,
    format_p,
    render_crossover,
    render_decisions,
    render_health,
    render_segments,
    render_table,
    shown_interval,
)
from tracker.report.rows import COLUMNS, LOWER_IS_BETTER, METRIC_ORDER, P_FLOOR, ROLE_ORDER
from tracker.report.segments import SEGMENT_COLUMNS, SegmentReport, segment_report

__all__ = ["COLUMNS", "LOWER_IS_BETTER", "LOWER_MARK", "METRIC_ORDER", "OUTCOME_LABELS",
           "P_FLOOR", "ROLE_LABELS", "ROLE_ORDER", "SEGMENT_COLUMNS", "Scorecard",
           "SegmentReport", "decision_line", "format_p", "render_crossover",
           "render_decisions", "render_health", "render_segments", "render_table", "report",
           "roles_for", "scorecard", "segment_report", "select", "shown_interval"]
