"""Crossover health: share of users exposed to more than one arm."""

from __future__ import annotations

import pytest

from tracker.stats import Health, MeanStats, Reason, compare, crossover_health
from tracker.stats.crossover import Population, choose_population


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


# ------------------------------------------------------------------------- ITT beside PP
def _compared(treatment_hits: int, control_hits: int, n: int = 4000):
    return compare(MeanStats(n, float(treatment_hits), float(treatment_hits)),
                   MeanStats(n, float(control_hits), float(control_hits)))


@pytest.mark.parametrize(("pp", "itt", "decides", "disagree"), [
    pytest.param(_compared(520, 400), _compared(510, 400), Population.PER_PROTOCOL, False,
                 id="both-significant-same-sign-per-protocol"),
    pytest.param(_compared(520, 400), _compared(430, 400), Population.INTENT_TO_TREAT, True,
                 id="significance-differs-intent-to-treat"),
    pytest.param(_compared(410, 400), _compared(395, 400), Population.INTENT_TO_TREAT, True,
                 id="sign-differs-intent-to-treat"),
    pytest.param(_compared(520, 400), None, Population.PER_PROTOCOL, False,
                 id="no-intent-to-treat-estimate"),
])
def test_the_decision_reads_intent_to_treat_when_the_two_disagree(pp, itt, decides, disagree):
    choice = choose_population(pp, itt)
    assert (choice.decides, choice.disagree) == (decides, disagree)
    assert choice.decides.value in choice.why.replace("-", "_") or not disagree


def test_the_share_warns_from_one_percent():
    assert crossover_health(10_000, 99).status is Health.OK
    assert crossover_health(10_000, 100).status is Health.WARN
