"""CUPED's covariate sums per cell, metric column and view (the per-user covariates:
:mod:`tracker.rollup.covariates`).

Over the users the metric rows count (:func:`~tracker.rollup.aggregate.counted`, with the
metric defined), with the covariates of :data:`SUM_COVARIATES` (``pre_metric`` is, in the
row of a column, that column's ``pre:`` covariate; 0 for surprisal and unexpectedness): Σx,
Σx_a·x_b, Σx·y with y the user's mean (the per-user view) and Σx·s, Σx·m with s the user's
sum and m their impressions (the per-impression ratio view), stored per day and view in
``rollup_covariate_sums``: a row per (cell, metric, k) with a column per sum, as
``rollup_metric`` holds the other sufficient statistics, so SQL reads them. Each term is a
product of a weight per (user, column) and a factor (:func:`_factors`, the one formula):
summed in float by matrix products for a daily view, materialised per user
(:func:`add_terms`) for the cumulative view's exact sums
(:class:`~tracker.rollup.deltas.ViewSums`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.rollup.accumulate import ExactSums
from tracker.rollup.aggregate import UnitTotals, cell_blocks, counted
from tracker.rollup.cells import Cells
from tracker.rollup.outcomes import Layout
from tracker.rollup.pre_metrics import PREFIX, index_in
from tracker.rollup.user_covariates import BASE, UserCovariates
from tracker.store import bulk
from tracker.store.experiments import ExperimentInfo
from tracker.store.rollup_tables import (
    COVARIATE_PAIRS,
    COVARIATES,
    RollupCheckpoint,
    RollupCovariateSums,
    RollupUserCovariates,
    covariate_sum_columns,
)

SUM_COVARIATES = COVARIATES
"""The covariates of each row of the sums, in order (``pre_metric``: the row's ``pre:``)."""
_PRE = SUM_COVARIATES.index("pre_metric")
_SHARED = [BASE.index(c) for c in SUM_COVARIATES if c != "pre_metric"]
PAIRS = COVARIATE_PAIRS


def sum_columns() -> list[str]:
    """The names of the sums of a row, in the order :func:`_cell_sums` computes them."""
    return [name for name, _ in covariate_sum_columns()]


def _factors(present: np.ndarray, y: np.ndarray, sums: np.ndarray, m: np.ndarray,
             shared: np.ndarray, pre: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The terms of the sums, in the order of :func:`sum_columns`, each a product ``w * x``
    of a weight per (user, column) and a factor per user ``(users, 1)`` or per (user,
    column): weights are ``present``, y, s, m; ``shared`` the covariates every column has
    (in the order of :data:`SUM_COVARIATES` without ``pre_metric``), ``pre`` the column's
    own. A cell's sums are these terms summed over its users."""
    def column(a: int) -> np.ndarray:
        return pre if a == _PRE else shared[:, [a - (a > _PRE)]]

    def weighted(w: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for a in range(len(SUM_COVARIATES)):
            yield w, column(a)

    yield from weighted(present)
    for a, b in PAIRS:
        if _PRE in (a, b):  # the column's own covariate: a factor per (user, column)
            yield present * pre, column(b if a == _PRE else a)
        else:
            yield present, column(a) * column(b)
    for w in (y, sums, m):
        yield from weighted(w)


def add_terms(acc: ExactSums, *weights: np.ndarray, sign: int = 1) -> None:
    """Add (``sign=-1``: retract) each user's terms (:func:`_factors` of ``weights``) to
    ``acc``, exactly: ``len(sum_columns()) * columns`` columns, per user the ``(sums,
    columns)`` matrix flattened. A term whose weight or factor is 0 for every user is left
    out, never materialised (users without a pre-period have most covariates 0)."""
    users, columns = weights[0].shape
    given = {id(w): bool(w.any()) for w in weights[:4]}  # present, y, s, m: each tested once

    def nonzero(w: np.ndarray) -> bool:  # a weight _factors derives is tested where made
        return given[id(w)] if id(w) in given else bool(w.any())

    kept = [(at, w, x) for at, (w, x) in enumerate(_factors(*weights))
            if x.any() and nonzero(w)]
    out = np.empty((users, len(kept), columns))  # each term's columns contiguous
    for i, (_, w, x) in enumerate(kept):
        np.multiply(w, x, out=out[:, i, :])
    into = (np.array([at for at, _, _ in kept], dtype=np.intp)[:, None] * columns
            + np.arange(columns)).ravel()
    acc.add(out.reshape(users, -1), sign, into=into)


def _summed_terms(*weights: np.ndarray) -> np.ndarray:
    """The terms (:func:`_factors` of ``weights``) summed over the users in float, flattened
    as :func:`add_terms` (a factor per user: a matrix product, never the terms)."""
    return np.concatenate([w.T @ x[:, 0] if x.shape[1] == 1 else (w * x).sum(axis=0)
                           for w, x in _factors(*weights)])


def covariate_rows(totals: UnitTotals, covariates: UserCovariates) -> np.ndarray:
    """Each row's user's row in ``covariates`` (-1: none), for :func:`cell_terms` (looked
    up once for every cell)."""
    return index_in(totals.users, covariates.users) if totals.size else \
        np.empty(0, dtype=np.int64)


def cell_terms(totals: UnitTotals, covariates: UserCovariates, layout: Layout, cell: int,
               keep: np.ndarray | None = None, found: np.ndarray | None = None
               ) -> Iterator[tuple[np.ndarray, ...]]:
    """The weights of :func:`_factors` of the users of ``cell`` the metric rows count
    (``keep``: the non-crossover rows, by default of ``totals`` itself), block by block
    (:func:`~tracker.rollup.aggregate.cell_blocks`): :func:`add_terms` of them are the
    users' terms, :func:`_summed_terms` their float sums. ``found``: :func:`covariate_rows`
    (looked up here when not given)."""
    names = covariates.names
    found = covariate_rows(totals, covariates) if found is None else found
    pre = [(j, names.index(PREFIX + column)) for j, column in enumerate(layout.names)
           if PREFIX + column in names]
    keep = counted(totals) if keep is None else keep
    for block in cell_blocks(totals, cell, keep):
        x = covariates.at(found[block.rows])
        own = np.zeros((block.rows.size, len(layout)))  # each column's ``pre:`` covariate
        for j, c in pre:
            own[:, j] = x[:, c]
        yield (block.present.astype(float), block.means, block.sums, block.weights,
               x[:, _SHARED], own)


def covariate_sums(totals: UnitTotals, covariates: UserCovariates, layout: Layout,
                   codes: list[int], exact: bool = False) -> pa.Table:
    """Per cell (``cell``, of ``codes``) and layout column (``metric``, ``k``), the covariate
    sums over the non-crossover users with the metric defined (see the module docstring):
    the terms of :func:`cell_terms` added up block by block, or (``exact``, the cumulative
    view's: :class:`~tracker.rollup.deltas.ViewSums` moves them by deltas) exactly, rounded
    once."""
    # once per totals and covariates: a first day's daily and cumulative views are one
    return totals.derived(("covariate_sums", id(covariates), tuple(layout.names),
                           tuple(codes), exact),
                          lambda: _covariate_sums(totals, covariates, layout, codes, exact))


def _covariate_sums(totals: UnitTotals, covariates: UserCovariates, layout: Layout,
                    codes: list[int], exact: bool) -> pa.Table:
    width = len(layout) * len(sum_columns())
    covariates = covariates.subset(pc.unique(totals.users))  # looked up among few
    found, keep = covariate_rows(totals, covariates), counted(totals)
    per_cell = {}
    for cell in codes:
        if exact:
            acc = ExactSums(width)
            for weights in cell_terms(totals, covariates, layout, cell, keep, found):
                add_terms(acc, *weights)
            per_cell[cell] = acc.sums()
        else:
            out = np.zeros(width)
            for weights in cell_terms(totals, covariates, layout, cell, keep, found):
                out += _summed_terms(*weights)
            per_cell[cell] = out
    return sums_table(per_cell, layout)


def sums_table(per_cell: dict[int, np.ndarray], layout: Layout) -> pa.Table:
    """The sums of each cell (flattened ``(sums, columns)``, as :func:`add_terms` adds
    them) as a table: ``cell``, ``metric``, ``k`` and a column per sum."""
    columns: dict[str, list] = {"cell": [], "metric": [], "k": []}
    blocks = []
    for cell, values in per_cell.items():
        blocks.append(np.asarray(values).reshape(len(sum_columns()), len(layout)).T)
        columns["cell"] += [cell] * len(layout)
        columns["metric"] += [metric for metric, _ in layout.columns]
        columns["k"] += [k for _, k in layout.columns]
    values = np.vstack(blocks) if blocks else np.zeros((0, len(sum_columns())))
    data = {"cell": pa.array(columns["cell"], type=pa.int64()),
            "metric": pa.array(columns["metric"], type=pa.string()),
            "k": pa.array(columns["k"], type=pa.int64())}
    data.update({name: pa.array(values[:, j]) for j, name in enumerate(sum_columns())})
    return pa.table(data)


def write_sums(conn: sa.Connection, info: ExperimentInfo, day: date, cumulative: bool,
               totals: UnitTotals | None, covariates: UserCovariates | None,
               layout: Layout) -> None:
    """Replace the stored sums of one day and view from its users' totals (nothing when
    CUPED is off; a cumulative view's exact, as its deltas give them)."""
    if covariates is None:
        return
    insert_sums(conn, info, day, cumulative, None if totals is None else covariate_sums(
        totals, covariates, layout, list(Cells.of(info).codes), exact=cumulative))


def insert_sums(conn: sa.Connection, info: ExperimentInfo, day: date, cumulative: bool,
                sums: pa.Table | None) -> None:
    """Replace the stored sums of one day and view by ``sums`` (:func:`sums_table`; None:
    none)."""
    table = RollupCovariateSums.__table__
    conn.execute(sa.delete(table).where(
        table.c.experiment_id == info.id, table.c.day == day,
        table.c.cumulative.is_(cumulative)))
    if sums is None:
        return
    sql = dict(covariate_sum_columns())  # name -> SQL column
    rows = sums.rename_columns([sql.get(c, c) for c in sums.column_names]).to_pylist()
    cells = Cells.of(info)
    for row in rows:
        row.update(cells.stored(row.pop("cell")), experiment_id=info.id, day=day,
                   cumulative=cumulative)
    bulk.insert_dicts(conn, table, rows)


def publish_daily(conn: sa.Connection, info: ExperimentInfo, daily: dict,
                  covariates: UserCovariates | None, everything: bool) -> None:
    """The daily sums of the run's days (of ``daily``'s :class:`DayResult`s); with
    ``everything``, everything stored of the experiment is dropped first."""
    if everything:  # the users' covariates too: :func:`settle` stores those of the rebuild
        delete_all(conn, info.id)
    layout = Layout.for_cutoffs(list(info.cutoffs))
    for day, result in daily.items():
        write_sums(conn, info, day, False, result.totals, covariates, layout)


def delete_cumulative(conn: sa.Connection, experiment_id: int, since: date) -> None:
    conn.execute(sa.delete(RollupCovariateSums).where(
        RollupCovariateSums.experiment_id == experiment_id,
        RollupCovariateSums.cumulative.is_(True), RollupCovariateSums.day >= since))


def delete_all(conn: sa.Connection, experiment_id: int) -> None:
    """Forget the experiment's CUPED state: the users' covariates and every sum."""
    for table in (RollupUserCovariates, RollupCovariateSums):
        conn.execute(sa.delete(table).where(table.experiment_id == experiment_id))
    conn.execute(sa.update(RollupCheckpoint).where(
        RollupCheckpoint.experiment_id == experiment_id).values(covariates=None))
