"""CUPED's pre-period metric covariates: each user's value of the metric itself before
first exposure (for the covariates around them see :mod:`tracker.rollup.covariates`).

For a user first exposed at ``t`` (served time) whose first impression was received at
``got``, the **pre-period lists** are the user's impressions of *any* experiment served in
``[t − cuped_days, t)`` and received by ``got``; the **pre-period interactions** are the
user's interactions that occurred in that same window and were received by ``got``: the
history as known at first exposure, and all of it before exposure (a click on an old list
that occurred after ``t`` could answer the experiment's list too, so the treatment could
move it: it is left out). Fixed at first sight like the other covariates, so a ``--full``
rebuild computes the same values.

The lists are then **scored with this experiment's definitions**: its cutoffs, relevance
grades and attribution window, by :func:`tracker.rollup.columnar.score_chunk` (the rollup's
own attribution and ``tracker.metrics`` kernels, nothing re-implemented): an interaction
answers the lists served in ``[occurred − window, occurred]``, one that names a pre-period
list (by its impression id, and of the same user) that list only. ``pre:<column>`` is the
user's mean over their pre-period lists, for every per-user column scored from a list and
its ground truth alone (``hit_rate@k``, ``precision@k``, ``recall@k``, ``mrr@k``, ``map@k``,
``ndcg@k``, ``roc_auc@k``, ``r_precision``, ``song_clicks``). Surprisal and unexpectedness
get none: they need the item popularity of the window or the list's baseline, which are
another experiment's facts. ``no_pre_lists`` is 1 for a user with no pre-period list (every
``pre:`` value is then 0).

**Cost.** Per chunk of users (:mod:`tracker.rollup.covariates` sorts them by first
exposure, so a chunk's windows overlap), one read of their interactions over the window
(:func:`interactions`, the ``(user_id, occurred_at)`` index; it serves the interaction
covariates too) and one of their pre-period lists (the ``(user_id, served_at)`` index of
migration 0013); PostgreSQL joins ``unnest`` of the users' windows, SQLite reads the
chunk's users over the chunk's time range and numpy keeps each user's window. A chunk's
lists are scored at once: its memory follows its users' lists in the window, not
``TRACKER_ROLLUP_CHUNK_CELLS``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.rollup.codes import Vocabulary
from tracker.rollup.columnar import Interactions, score_chunk
from tracker.rollup.outcomes import BEYOND, Layout
from tracker.rollup.popularity import Popularity
from tracker.rollup.state import column_name
from tracker.store.arrow import LIST, json_lists
from tracker.store.experiments import ExperimentInfo
from tracker.store.models import Impression, Interaction
from tracker.store.types import stored_micros

NO_LISTS = "no_pre_lists"
PREFIX = "pre:"
_LISTS = pa.schema([pa.field("id", pa.int64()), pa.field("arm", pa.int64()),
                    pa.field("user", pa.string()), pa.field("served", pa.int64()),
                    pa.field("items", LIST), pa.field("baseline", LIST)])
_TIMED = pa.schema([pa.field("user", pa.string()), pa.field("item", pa.string()),
                    pa.field("event", pa.string()), pa.field("at", pa.int64())])
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


def windows(users: list[str], lo: np.ndarray, hi: np.ndarray, got: np.ndarray):
    """The users' windows as a PostgreSQL table ``w(user_id, lo, hi, got)``: ``unnest`` of
    four arrays (four parameters, one plan whatever the chunk)."""
    from sqlalchemy.dialects.postgresql import ARRAY

    return (sa.text("SELECT * FROM unnest(:u, :lo, :hi, :got) AS w(user_id, lo, hi, got)")
            .bindparams(sa.bindparam("u", users, type_=ARRAY(sa.String)),
                        sa.bindparam("lo", lo.tolist(), type_=ARRAY(sa.BigInteger)),
                        sa.bindparam("hi", hi.tolist(), type_=ARRAY(sa.BigInteger)),
                        sa.bindparam("got", got.tolist(), type_=ARRAY(sa.BigInteger)))
            .columns(user_id=sa.String, lo=sa.BigInteger, hi=sa.BigInteger, got=sa.BigInteger)
            .subquery("w"))


def pre_metrics(conn: sa.Connection, info: ExperimentInfo, users: pa.Array, lo: np.ndarray,
                hi: np.ndarray, got: np.ndarray, events: pa.Table
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per user of ``users`` (each with the window ``[lo, hi)`` and the instant ``got``, µs;
    ``events``: their :func:`interactions`, read once for every covariate): the ``pre:``
    values in the order of :func:`pre_columns` ``(users, columns)`` and the
    ``no_pre_lists`` indicator ``(users,)``."""
    return scored_lists(info, users, _lists(conn, users, lo, hi, got), events)


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


def _lists(conn: sa.Connection, users: pa.Array, lo: np.ndarray, hi: np.ndarray,
           got: np.ndarray) -> pa.Table:
    """The pre-period lists of ``users`` (columns of :data:`_LISTS` plus ``key``, the
    impression id as logged; ``id`` is the row number, every ``arm`` 0)."""
    sqlite = conn.dialect.name != "postgresql"
    items = sa.type_coerce(Impression.items, sa.Text) if sqlite else Impression.items
    columns = (Impression.user_id, Impression.impression_key, stored_micros(Impression.served_at),
               items)
    rows = _read(conn, users, lo, hi, got, columns, Impression.__table__, Impression.user_id,
                 stored_micros(Impression.served_at), stored_micros(Impression.received_at))
    n = len(rows)
    # SQLite's JSON texts split by pyarrow (no Python list per row)
    lists = json_lists(pa.array([r[3] for r in rows], pa.string())) if sqlite else \
        pa.array([r[3] for r in rows], LIST)
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)), "arm": pa.array(np.zeros(n, np.int64)),
        "user": pa.array([r[0] for r in rows], pa.string()),
        "served": pa.array([r[2] for r in rows], pa.int64()),
        "items": lists,
        "baseline": pa.nulls(n, LIST),
        "key": pa.array([r[1] for r in rows], pa.string())})


def interactions(conn: sa.Connection, users: pa.Array, lo: np.ndarray, hi: np.ndarray,
                 got: np.ndarray) -> pa.Table:
    """The pre-period interactions of ``users`` (each user's that occurred in their ``[lo,
    hi)`` and were received by their ``got``): ``user, item, event, at`` and ``key`` (the
    impression it names, null when none)."""
    columns = (Interaction.user_id, Interaction.item_id, Interaction.event_type,
               stored_micros(Interaction.occurred_at), Interaction.impression_key)
    rows = _read(conn, users, lo, hi, got, columns, Interaction.__table__,
                 Interaction.user_id, stored_micros(Interaction.occurred_at),
                 stored_micros(Interaction.received_at))
    names = ("user", "item", "event", "at", "key")
    kinds = (pa.string(), pa.string(), pa.string(), pa.int64(), pa.string())
    return pa.table({name: pa.array([r[j] for r in rows], kind)
                     for j, (name, kind) in enumerate(zip(names, kinds, strict=True))})


def _read(conn: sa.Connection, users: pa.Array, lo: np.ndarray, hi: np.ndarray,
          got: np.ndarray, columns: Sequence, table: sa.Table, user, at, received
          ) -> list[tuple]:
    """``columns`` of the rows of each user of ``users`` whose ``at`` lies in the user's
    ``[lo, hi)`` and whose ``received`` is not after the user's ``got``. PostgreSQL joins
    ``unnest`` of the windows (an index range per user, or a hash join where the planner
    finds the table small); SQLite reads the users over the chunk's time range by the
    ``(user, time)`` index and numpy keeps each user's window."""
    ids = users.to_pylist()
    if not ids:
        return []
    if conn.dialect.name == "postgresql":
        w = windows(ids, lo, hi, got)
        return conn.execute(sa.select(*columns).select_from(w).join(
            table, sa.and_(user == w.c.user_id, at >= w.c.lo, at < w.c.hi,
                           received <= w.c.got))).all()
    rows = conn.execute(sa.select(*columns, at, received).where(
        user.in_(ids), at >= int(lo.min()), at < int(hi.max()))).all()
    if not rows:
        return []
    who = index_in(pa.array([r[0] for r in rows], pa.string()), users)
    at_us = np.array([r[-2] for r in rows], dtype=np.int64)
    got_us = np.array([r[-1] for r in rows], dtype=np.int64)
    keep = (at_us >= lo[who]) & (at_us < hi[who]) & (got_us <= got[who])
    return [rows[i][:-2] for i in np.flatnonzero(keep)]


__all__ = ["NO_LISTS", "PREFIX", "index_in", "interactions", "pre_columns",
           "pre_metrics", "scored_lists", "windows"]
