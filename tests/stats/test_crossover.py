"""Crossover health: share of users exposed to more than one arm."""

from __future__ import annotations

import pytest

from tracker.stats import Health, Reason, crossover_health


@pytest.mark.parametrize(
    ("users", "crossed", "status"),
    [
        pytest.param(10_000, 0, Health.OK, id="no-crossover-is-ok"),
        pytest.param(10_000, 99, Health.OK, id="just-below-one-percent-is-ok"),
        pytest.param(10_000, 100, Health.WARN, id="one-percent-warns"),
        pytest.param(10_000, 999, Health.WARN, id="just-below-ten-percent-warns"),
        pytest.param(10_000, 1_000, Health.ALERT, id="ten-percent-alerts"),
        pytest.param(3, 3, Health.ALERT, id="everyone-crossed-alerts"),
    ],
)
def test_status_thresholds(users: int, crossed: int, status: Health) -> None:
    r = crossover_health(users, crossed)
    assert r.status is status
    assert r.share == pytest.approx(crossed / users)
    assert r.reason is Reason.OK


def test_thresholds_are_parameters() -> None:
    assert crossover_health(1_000, 30, warn_at=0.05, alert_at=0.2).status is Health.OK


def test_no_users_has_no_share() -> None:
    r = crossover_health(0, 0)
    assert (r.share, r.status, r.reason) == (None, None, Reason.NO_USERS)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"users": 10, "crossover_users": 11}, "cannot exceed users",
                     id="more-crossed-than-users"),
        pytest.param({"users": -1, "crossover_users": 0}, "non-negative integer",
                     id="negative-users"),
        pytest.param({"users": 10, "crossover_users": 1, "warn_at": 0.2, "alert_at": 0.1},
                     "warn_at <= alert_at", id="warn-above-alert"),
    ],
)
def test_programming_errors_raise_clear_messages(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        crossover_health(**kwargs)
