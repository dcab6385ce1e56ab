"""Every table of the store on one ``MetaData``: what Alembic compares the migrations with.

The tables are defined by aggregate (:mod:`tracker.store.models`: raw logs and the experiment
registry; :mod:`tracker.store.keys`: the collector's API keys; :mod:`tracker.store.log_expiry`:
the retention runs; :mod:`tracker.store.rollup_tables`: what the rollup writes;
:mod:`tracker.store.summaries`: the experiments list's stored summaries), each on
:class:`tracker.store.base.Base`. A class registers when its module is imported: this module
imports them all, so ``metadata`` here is complete (a test holds it to every ``Base``
subclass under ``tracker/store``).
"""

from __future__ import annotations

from tracker.store import keys, log_expiry, models, rollup_tables, summaries
from tracker.store.base import Base

MODULES = (models, keys, log_expiry, rollup_tables, summaries)
"""The modules that define tables."""

metadata = Base.metadata
