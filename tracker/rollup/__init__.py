"""The incremental rollup: attribution, per-impression metrics, unit-day outcomes, arm-day
sufficient statistics (daily and cumulative), and the read API over them.

Entry points: :func:`tracker.rollup.engine.run_rollup` (``tracker rollup``) and
:mod:`tracker.rollup.read` (``Tracker.metric_table``).
"""
