"""The model of arrivals behind "days to target": known answers, the cap, properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.stats.arrivals import MAX_HORIZON_DAYS, Arrivals, constant_arrivals, fit_arrivals


def test_halving_arrivals_are_fitted_exactly_with_the_pool_they_leave():
    a = fit_arrivals([800, 400, 200, 100])
    assert a.decay == pytest.approx(0.5) and a.rate == pytest.approx(100)
    assert a.pool == pytest.approx(100)  # 50 + 25 + 12.5 + ...
    assert a.users_within(3) == pytest.approx(87.5)
    assert a.days_to(87.5) == 3 and a.days_to(a.pool) is None  # the pool never fills up


def test_the_audit_case_is_not_promised_by_a_linear_extrapolation():
    # 1,000 new users on day 0 declining 10 % a day; after 14 days the rate is 254 a day. A
    # straight line at that rate promises 12,000 more users in 48 days, but only 2,290 more
    # will ever come: the target is out of reach, and the model says so
    series = 1000 * 0.9 ** np.arange(14)
    a = fit_arrivals(series)
    assert a.decay == pytest.approx(0.9) and a.rate == pytest.approx(1000 * 0.9**13)
    assert a.pool == pytest.approx(1000 * 0.9**14 / 0.1)
    assert a.days_to(12_000) is None
    assert constant_arrivals(a.rate).days_to(12_000) == math.ceil(12_000 / a.rate)


def test_growing_traffic_is_held_at_its_last_rate_not_extrapolated():
    a = fit_arrivals([100, 120, 144, 172.8])
    assert a.decay == 1.0 and a.rate == pytest.approx(172.8, rel=1e-6)


def test_matches_statsmodels_poisson_glm():
    sm = pytest.importorskip("statsmodels.api")
    y = np.array([530, 470, 380, 390, 300, 280, 260, 210, 190, 200])
    t = np.arange(y.size, dtype=float)
    fit = sm.GLM(y, sm.add_constant(t), family=sm.families.Poisson()).fit()
    a = fit_arrivals(y)
    assert a.decay == pytest.approx(math.exp(fit.params[1]), rel=1e-9)
    assert a.rate == pytest.approx(math.exp(fit.params[0] + fit.params[1] * t[-1]), rel=1e-9)


def test_the_horizon_caps_the_days():
    slow = constant_arrivals(1.0)
    assert slow.days_to(1_000) is None  # 1,000 days > a year
    assert slow.days_to(300) == 300 and slow.days_to(300, horizon=299) is None
    assert MAX_HORIZON_DAYS == 365


def test_no_days_no_model_and_bad_counts_raise():
    assert fit_arrivals([]) is None
    with pytest.raises(ValueError, match="counts >= 0"):
        fit_arrivals([10, -1])


@settings(deadline=None)  # no timing in tests: the machine is shared
@given(st.lists(st.integers(0, 5_000), min_size=1, max_size=30),
       st.floats(1, 1e5), st.integers(1, 400))
def test_days_to_is_the_first_day_the_forecast_reaches_the_users(series, users, horizon):
    a = fit_arrivals(series)
    assert a is not None and 0 < a.decay <= 1
    days = a.days_to(users, horizon)
    if days is None:
        assert a.users_within(horizon) < users * (1 + 1e-9)
    else:
        assert 1 <= days <= horizon
        assert a.users_within(days) >= users * (1 - 1e-9)
        assert a.users_within(days - 1) < users * (1 + 1e-9)


def test_arrivals_is_a_value():
    assert Arrivals(1.0, 1.0, math.inf, 0) == constant_arrivals(1.0)
