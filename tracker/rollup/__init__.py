"""The incremental rollup: attribution, per-impression metrics, unit-day outcomes, arm-day
sufficient statistics (daily and cumulative).

Entry point: :func:`tracker.rollup.engine.run_rollup` (``tracker rollup``). The results are
read through :mod:`tracker.store.computed` (``Tracker.metric_table``).
"""
