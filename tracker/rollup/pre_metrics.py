"""CUPED's pre-period metric covariates: each user's value of the metric itself before
first exposure (for the covariates around them see :mod:`tracker.rollup.covariates`).

For a user first exposed at ``t`` (the earliest served of their impressions in the
experiment), the **pre-period lists** are the user's impressions of *any* experiment served
in ``[t − cuped_days, t)``, and the **pre-period interactions** the user's interactions that
occurred in that same window: what happened before exposure, whenever it was logged (a
click on an old list that occurred after ``t`` could answer the experiment's list too, so
the treatment could move it: it is left out). A row logged late that falls in a known
user's window changes that user's values (:func:`tracker.rollup.covariates.refresh`), so
any order of arrival gives the values a ``--full`` rebuild computes.

The lists are then **scored with this experiment's definitions**: its cutoffs, relevance
grades and attribution window, by :func:`tracker.rollup.columnar.score_chunk` (the rollup's
own attribution and ``tracker.metrics`` kernels, nothing re-implemented): an interaction
answers the lists served in ``[occurred − window, occurred]``, one that names a pre-period
list (by its impression id, and of the same user) that list only. ``pre:<column>`` is the
user's mean over their pre-period lists, for every per-user column scored from a list and
its ground truth alone (``hit_rate@k``, ``precision@k``, ``recall@k``, ``mrr@k``, ``map@k``,
``ndcg@k``, ``roc_auc@k``, ``r_precision``, ``song_clicks``). Surprisal and unexpectedness
get none: they need the experiment's item popularity or the list's baseline, which are
another experiment's facts. ``no_pre_lists`` is 1 for a user with no pre-period list (every
``pre:`` value is then 0).

**Cost.** Per chunk of users (:mod:`tracker.rollup.covariates` sorts them by first
exposure, so a chunk's windows overlap), one read of their interactions over the window
(:func:`interactions`, the ``(user_id, occurred_at)`` index; it serves the interaction
covariates too) and one of their pre-period lists (the ``(user_id, served_at)`` index of
migration 0013), as Arrow through :class:`tracker.store.arrow.ArrowReader` with the users
and their windows bound as arrays (no Python object per row or per user on PostgreSQL);
PostgreSQL joins ``unnest`` of the users' windows, SQLite reads the chunk's users over the
chunk's time range and numpy keeps each user's window. A chunk's
lists are scored at once: its memory follows its users' lists in the window, not
``TRACKER_ROLLUP_CHUNK_CELLS``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.rollup.cells import WHOLE
from tracker.rollup.codes import Vocabulary
from tracker.rollup.columnar import Interactions, score_chunk
from tracker.rollup.outcomes import BEYOND, Layout
from tracker.rollup.popularity import Popularity
from tracker.rollup.state import column_name
from tracker.store.arrow import LIST, ArrowReader
from tracker.store.experiments import ExperimentInfo

NO_LISTS = "no_pre_lists"
PREFIX = "pre:"
_LISTS = pa.schema([pa.field("id", pa.int64()), pa.field("cell", pa.int64()),
                    pa.field("user", pa.string()), pa.field("served", pa.int64()),
                    pa.field("items", LIST), pa.field("baseline", LIST)])
_TIMED = pa.schema([pa.field("user", pa.string()), pa.field("item", pa.string()),
                    pa.field("event", pa.string()), pa.field("at", pa.int64())])
_SOURCE = {"user": "user_id", "key": "impression_key", "at": "{at}", "items": "items",
           "item": "item_id", "event": "event_type"}
"""The stored column of each column :func:`_read` returns (``at``: the row's time)."""
_LIST_ROWS = pa.schema([pa.field("user", pa.string(), False), pa.field("key", pa.string()),
                        pa.field("at", pa.int64(), False), pa.field("items", LIST, False)])
_EVENT_ROWS = pa.schema([pa.field("user", pa.string(), False),
                         pa.field("item", pa.string(), False),
                         pa.field("event", pa.string(), False),
                         pa.field("at", pa.int64(), False), pa.field("key", pa.string())])
_KEYED = pa.schema([pa.field("impression", pa.int64()), pa.field("item", pa.string()),
                    pa.field("event", pa.string())])


def pre_columns(layout: Layout) -> tuple[str, ...]:
    """The layout's columns that get a pre-period covariate (all but surprisal and
    unexpectedness), as stored names (``ndcg@10``, ``r_precision``).

    >>> pre_columns(Layout.for_cutoffs([5]))[:3], "surprisal@5" in pre_columns(
    ...     Layout.for_cutoffs([5]))
    (('hit_rate@5', 'precision@5', 'recall@5'), False)
    """
    return tuple(column_name(m, k) for m, k in layout.columns if m not in BEYOND)


def index_in(values: pa.Array, within: pa.Array) -> np.ndarray:
    """Each value's position in ``within``, -1 where absent."""
    return pc.fill_null(pc.index_in(values, value_set=within), -1).to_numpy().astype(np.int64)


def pre_metrics(reader: ArrowReader, info: ExperimentInfo, users: pa.Array, lo: np.ndarray,
                hi: np.ndarray, events: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Per user of ``users`` (each with the window ``[lo, hi)``, µs; ``events``: their
    :func:`interactions`, read once for every covariate): the ``pre:`` values in the order
    of :func:`pre_columns` ``(users, columns)`` and the ``no_pre_lists`` indicator
    ``(users,)``."""
    return scored_lists(info, users, _lists(reader, users, lo, hi), events)


def scored_lists(info: ExperimentInfo, users: pa.Array, lists: pa.Table, events: pa.Table
                 ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pre_metrics` of already read rows (pure: the Spark engine calls it on Arrow
    tables from the lake): ``lists``, the users' pre-period lists (columns of
    :data:`_LISTS` plus ``key``, as :func:`_lists` reads them), and ``events``, their
    pre-period :func:`interactions`."""
    layout = Layout.for_cutoffs(list(info.cutoffs))
    wanted = [layout.names.index(name) for name in pre_columns(layout)]
    values = np.zeros((len(users), len(wanted)))
    no_lists = np.ones(len(users))
    if not lists.num_rows:
        return values, no_lists
    codes = Vocabulary()
    codes.encode([users])  # code i is users[i]
    keyed = events.filter(pc.is_valid(events["key"]))
    named = index_in(pc.binary_join_element_wise(keyed["user"], keyed["key"], "\x1f"),
                     pc.binary_join_element_wise(lists["user"], lists["key"], "\x1f"))
    keyed = pa.table({"impression": pa.array(named), "item": keyed["item"],
                      "event": keyed["event"]}, schema=_KEYED).filter(pa.array(named >= 0))
    timed = events.filter(pc.is_null(events["key"])).select(_TIMED.names)
    window = int(info.attribution_window.total_seconds() * 1_000_000)
    result = score_chunk(lists.select(_LISTS.names), Interactions.of(timed, info.relevance,
                                                                     codes),
                         keyed, Popularity.empty(), info.relevance, window, list(info.cutoffs),
                         layout, Vocabulary(), codes)
    totals = result.totals
    means = np.divide(totals.sums, totals.counts, out=np.zeros_like(totals.sums),
                      where=totals.counts > 0)
    values[totals.users] = means[:, wanted]
    no_lists[totals.users] = 0.0
    return values, no_lists


def any_lists(conn: sa.Connection, experiment_id: int, lo: np.ndarray, hi: np.ndarray
              ) -> bool:
    """Whether some impression could be a pre-period list of users of ``experiment_id``
    with the windows ``[lo, hi)``: one of another experiment served in ``[min lo, max hi)``
    (none of the experiment's own can be: a user's first exposure is the earliest of them).
    One index lookup per experiment, where the lists' reads probe the index once per user
    (a first experiment on fresh logs has no list to read at all)."""
    window = {"lo": int(lo.min()), "hi": int(hi.max()), "experiment": experiment_id}
    return conn.execute(sa.text(
        "SELECT EXISTS (SELECT 1 FROM experiment x WHERE x.id <> :experiment AND EXISTS ("
        "SELECT 1 FROM impression i WHERE i.experiment_id = x.id "
        "AND i.served_at >= :lo AND i.served_at < :hi))"), window).scalar_one() in (True, 1)


def _lists(reader: ArrowReader, users: pa.Array, lo: np.ndarray, hi: np.ndarray) -> pa.Table:
    """The pre-period lists of ``users`` (columns of :data:`_LISTS` plus ``key``, the
    impression id as logged; ``id`` is the row number, every ``cell`` the whole experiment:
    pre-period lists fall in no cell)."""
    rows = _read(reader, users, lo, hi, "impression", "served_at", _LIST_ROWS)
    n = rows.num_rows
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "cell": pa.array(np.full(n, WHOLE, np.int64)),
        "user": rows["user"], "served": rows["at"], "items": rows["items"],
        "baseline": pa.nulls(n, LIST), "key": rows["key"]})


def interactions(reader: ArrowReader, users: pa.Array, lo: np.ndarray, hi: np.ndarray
                 ) -> pa.Table:
    """The pre-period interactions of ``users`` (each user's that occurred in their ``[lo,
    hi)``): ``user, item, event, at`` and ``key`` (the impression it names, null when
    none)."""
    return _read(reader, users, lo, hi, "interaction", "occurred_at", _EVENT_ROWS)


def _read(reader: ArrowReader, users: pa.Array, lo: np.ndarray, hi: np.ndarray,
          table: str, at: str, columns: pa.Schema) -> pa.Table:
    """``columns`` (named in :data:`_SOURCE`) of the rows of ``table`` of each user of
    ``users`` whose ``at`` lies in the user's ``[lo, hi)``, as Arrow (the users and windows
    bound as arrays, never inlined). PostgreSQL joins ``unnest`` of the windows (an index
    range per user, or a hash join where the planner finds the table small); SQLite reads
    the users over the chunk's time range by the ``(user, time)`` index and numpy keeps
    each user's window."""
    if not len(users):
        return columns.empty_table()
    selected = ", ".join(f"t.{_SOURCE[name].format(at=at)}" for name in columns.names)
    if reader.engine.dialect.name == "postgresql":
        return reader.read(
            f"SELECT {selected} FROM unnest(CAST(:users AS text[]), CAST(:lo AS bigint[]), "
            "CAST(:hi AS bigint[])) AS w(user_id, lo, hi) "
            f"JOIN {table} t ON t.user_id = w.user_id AND t.{at} >= w.lo AND t.{at} < w.hi",
            columns,
            {"users": users, "lo": pa.array(lo, pa.int64()), "hi": pa.array(hi, pa.int64())}
        ).combine_chunks()
    rows = reader.read(f"SELECT {selected} FROM {table} t "
                       f"WHERE t.user_id IN :users AND t.{at} >= :lo AND t.{at} < :hi", columns,
                       {"users": users, "lo": int(lo.min()), "hi": int(hi.max())})
    who = index_in(rows["user"], users)
    at_us = rows["at"].to_numpy()
    keep = (at_us >= lo[who]) & (at_us < hi[who])
    return rows.filter(pa.array(keep)).combine_chunks()


__all__ = ["NO_LISTS", "PREFIX", "any_lists", "index_in", "interactions", "pre_columns",
           "pre_metrics", "scored_lists"]
