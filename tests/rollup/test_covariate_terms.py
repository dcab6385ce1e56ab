"""CUPED's per-user terms added exactly (tracker.rollup.covariate_sums.add_terms): the terms
that are 0 for every user are never built, and the sums are those of every term."""

from __future__ import annotations

import numpy as np
import pytest

from tracker.rollup import covariate_sums
from tracker.rollup.accumulate import ExactSums
from tracker.rollup.covariate_sums import SUM_COVARIATES, add_terms, sum_columns


def _weights(rng: np.random.Generator, users: int, columns: int, pre_period: bool):
    """The weights of one block of users: present, means, sums, impressions, the shared
    covariates and each column's own (0 for users without a pre-period, as new users have)."""
    counts = rng.integers(0, 4, size=(users, columns)).astype(float)
    present = counts > 0
    sums = np.where(present, rng.integers(0, 3, size=(users, columns)) * 0.5, 0.0)
    means = np.divide(sums, counts, out=np.zeros_like(sums), where=present)
    shared = np.zeros((users, len(SUM_COVARIATES) - 1))
    own = np.zeros((users, columns))
    shared[:, 2] = 1.0  # no pre-period
    if pre_period:
        shared[:, 0] = rng.integers(0, 30, size=users)
        shared[:, 1] = rng.integers(0, 10, size=users)
        own[:] = rng.random((users, columns))
    return present.astype(float), means, sums, np.where(present, counts, 0.0), shared, own


@pytest.mark.parametrize("pre_period", [True, False])
def test_terms_zero_for_every_user_are_left_out_and_the_sums_are_every_terms(pre_period,
                                                                             monkeypatch):
    rng = np.random.default_rng(5)
    columns = 7
    weights = _weights(rng, 300, columns, pre_period)
    every = np.hstack([np.broadcast_to(w * x, (300, columns))
                       for w, x in covariate_sums._factors(*weights)])
    expected = ExactSums(every.shape[1])
    expected.add(every)

    built: list[int] = []
    real = ExactSums.add

    def spy(self, values, sign=1, into=None):
        built.append(np.asarray(values).shape[1])
        return real(self, values, sign, into)

    monkeypatch.setattr(ExactSums, "add", spy)
    acc = ExactSums(len(sum_columns()) * columns)
    add_terms(acc, *weights)
    acc.add(np.zeros((0, acc.columns)))  # nothing: no row
    add_terms(acc, *weights, sign=-1)
    add_terms(acc, *weights)
    assert acc.exact() == expected.exact()
    zero = sum(not (w.any() and x.any()) for w, x in covariate_sums._factors(*weights))
    assert zero > 0  # a block of users always has terms 0 for all (their covariates' pairs)
    assert built[0] == (len(sum_columns()) - zero) * columns
