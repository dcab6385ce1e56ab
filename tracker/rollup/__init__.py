"""The incremental rollup: attribution, per-impression metrics, unit-day outcomes, cell-day
sufficient statistics (daily and cumulative).

Every per-user and per-group result is keyed by a *cell* (``cells``: today an arm; with
segments, an arm and slice values); no other module knows what a cell is made of.

Entry point: :func:`tracker.rollup.engine.run_rollup` (``tracker rollup``). The results are
read through :mod:`tracker.store.computed` (``Tracker.metric_table``). The job over
experiments (``job``: targets, locks, failures, summaries) is shared with the Spark engine
(:mod:`tracker.spark.rollup`).

The modules, in the order a run uses them:

- ``engine``: one run per experiment: plan, days, last transaction (``summary``: what it did).
- ``plan``: which days, and which users of a day, new rows changed (``queries``: the SQL).
- ``day``: one day read, scored and written, whole (or, final since with nothing new,
  published from its stored rows); ``partial``: for some of its users only, their lists
  read again, over the stored rows of the others; ``pipeline``: read-ahead and scoring
  threads; every day scored against the experiment's item popularity, which the plan
  resolves.
- ``columnar``: one chunk, from Arrow tables to per-user totals (``codes``: ids to integer
  codes; ``truth``: its ground truth, compacted for a heavy user; ``outcomes``: the metric
  kernels of ``tracker.metrics`` per impression).
- ``aggregate``: per-user totals, cell statistics, health; ``exposure``: set-level inputs;
  ``popularity``: item popularity for surprisal; ``state``: the stored formats.
- ``published``: the rows the report reads; ``cumulative``: the cumulative pass, from the
  stored checkpoint (the newest final day: each user's totals, one row per user, and the
  view's exact sums) moved by the users of the days after it, so that a run reads and writes
  only the users its days hold; ``stores``: where the per-user state those passes read
  lives (the database, or a Spark state directory: one pass for both engines).
- ``covariates``: CUPED's per-user covariates by event time (``user_covariates``: their
  stored form), ``covariate_sums``: their sums per cell; ``pre_metrics``: the pre-period
  metric covariates.
- ``accumulate``: exact mergeable sums (add, retract, merge in any order equal a rebuild);
  ``deltas``: a view's statistics, health and CUPED's sums in them (``ViewSums``), moved by
  users' changes (the cumulative view's checkpoint); ``cells``: what a cell is, how a list
  falls in one and how one is named in the report's tables.
- ``retention``: the days expired logs leave recomputable; ``sources``: whose logs (the
  database's, or a Spark state directory's lake) an experiment's results came from, and when
  a run takes it over with a rebuild (one watermark rule for both engines).
- ``days``: reporting days as UTC bounds; ``lock``: one run per experiment at a time;
  ``schedule``: ``tracker rollup --every``.
"""
