"""The health checklist: each item on constructed inputs, and the overall status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.stats.health import (
    CheckStatus,
    HealthItem,
    crossover_item,
    data_lag_hours,
    freshness_item,
    health_checklist,
    overall_status,
    provisional_item,
    rollup_item,
    sample_item,
    srm_item,
)

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
EVEN = {"control": 1.0, "treatment": 1.0}


def healthy(**overrides):
    """A checklist whose every item passes unless overridden."""
    options = dict(users={"control": 5_000, "treatment": 5_000}, weights=EVEN, now=NOW,
                   newest_event=NOW - timedelta(hours=2),
                   last_rollup=NOW - timedelta(hours=3), total_users=10_000,
                   crossover_users=10, provisional_days=0)
    options.update(overrides)
    return health_checklist(**options)


def test_a_healthy_experiment_passes_every_check():
    checklist = healthy()
    assert checklist.status is CheckStatus.PASS and not checklist.blocks_ship
    assert [i.check for i in checklist.items] == ["srm", "sample", "crossover", "freshness",
                                                  "rollup", "provisional"]
    assert checklist.data_lag_hours == 2.0


def test_provisional_days_are_information_and_keep_the_status_green():
    checklist = healthy(provisional_days=3)
    assert checklist.item("provisional").status is CheckStatus.INFO
    assert "3 provisional day(s)" in checklist.item("provisional").message
    assert checklist.status is CheckStatus.PASS


def test_an_event_time_after_now_gives_a_zero_lag_never_a_negative_one():
    checklist = healthy(newest_event=NOW + timedelta(hours=15, minutes=30))
    item = checklist.item("freshness")
    assert checklist.data_lag_hours == 0.0
    assert item.status is CheckStatus.PASS
    assert "lag of 0 h" in item.message and "clock skew" in item.message
    assert "-15" not in item.message


@given(st.integers(min_value=-10**6, max_value=10**6))
def test_the_data_lag_is_never_negative(seconds):
    lag = data_lag_hours(NOW + timedelta(seconds=seconds), NOW)
    assert lag >= 0.0
    assert lag == pytest.approx(max(0, -seconds) / 3600)


@pytest.mark.parametrize(("hours", "running", "status"), [
    pytest.param(2, True, CheckStatus.PASS, id="two-hours-old-is-fresh"),
    pytest.param(36, True, CheckStatus.PASS, id="exactly-the-stale-age-is-still-fresh"),
    pytest.param(40, True, CheckStatus.WARN, id="past-36-hours-is-stale"),
    pytest.param(488, True, CheckStatus.WARN, id="488-hours-old-warns-while-running"),
    pytest.param(488, False, CheckStatus.INFO, id="488-hours-old-after-the-stop-is-expected"),
])
def test_freshness_by_age(hours, running, status):
    item = freshness_item(NOW - timedelta(hours=hours), NOW, running=running)
    assert item.status is status
    shown = f"{hours:.1f} h ago" if hours < 48 else f"{hours / 24:.1f} days ago"
    assert f"newest event {shown}" in item.message


def test_488_hour_old_data_warns_that_logging_stopped_but_greys_and_blocks_nothing():
    checklist = healthy(newest_event=NOW - timedelta(hours=488),
                        last_rollup=NOW - timedelta(hours=1))
    assert checklist.data_lag_hours == 488.0
    assert checklist.status is CheckStatus.WARN and not checklist.blocks_ship
    assert "logging looks stopped" in checklist.item("freshness").message


def test_the_stale_age_is_configurable():
    item = freshness_item(NOW - timedelta(hours=13), NOW, stale_after_hours=12)
    assert item.status is CheckStatus.WARN and "no event for over 12 h" in item.message


def test_without_events_freshness_is_information():
    checklist = healthy(newest_event=None, last_rollup=None,
                        users={"control": 0, "treatment": 0}, total_users=0,
                        crossover_users=0)
    assert checklist.data_lag_hours is None
    assert checklist.item("freshness").status is CheckStatus.INFO
    assert checklist.item("srm").status is CheckStatus.INFO
    assert checklist.item("rollup").status is CheckStatus.INFO


def test_a_naive_instant_is_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        data_lag_hours(datetime(2026, 11, 24), NOW)


@pytest.mark.parametrize(("users", "status", "size"), [
    pytest.param({"control": 10_600, "treatment": 9_400}, CheckStatus.FAIL,
                 "control got 6.00% more users than its declared share",
                 id="six-percent-off-a-50-50-split-fails"),
    pytest.param({"control": 5_100, "treatment": 4_900}, CheckStatus.PASS,
                 "control got 2.00% more users than its declared share",
                 id="p-0.046-is-no-mismatch"),
])
def test_srm_fails_when_the_test_flags_and_reports_the_size(users, status, size):
    item = srm_item(users, EVEN)
    assert item.status is status and size in item.message


def test_srm_also_reads_the_sequential_test_over_daily_looks():
    looks = [[1000, 1000], [2100, 1900], [3300, 2700]]
    users = {"control": 3300, "treatment": 2700}
    assert srm_item(users, EVEN, looks=looks).status is CheckStatus.FAIL
    assert "sequential p = " in srm_item(users, EVEN, looks=looks).message


def test_a_vanishing_srm_p_value_is_printed_as_a_bound_not_zero():
    item = srm_item({"control": 60_000, "treatment": 40_000}, EVEN)  # X^2 = 4,000
    assert item.status is CheckStatus.FAIL
    assert "(p < 1e-16)" in item.message and "p = 0" not in item.message


def test_srm_consumes_the_tests_threshold():
    users = {"control": 5_100, "treatment": 4_900}  # p = 0.0455, deviation 2 %
    assert srm_item(users, EVEN, threshold=0.05).status is CheckStatus.FAIL
    assert srm_item(users, EVEN).status is CheckStatus.PASS


@pytest.mark.parametrize(("crossed", "status"), [
    pytest.param(50, CheckStatus.PASS, id="half-a-percent-passes"),
    pytest.param(250, CheckStatus.WARN, id="two-and-a-half-percent-warns"),
    pytest.param(1_500, CheckStatus.FAIL, id="fifteen-percent-fails"),
])
def test_crossover_by_share(crossed, status):
    item = crossover_item(10_000, crossed)
    assert item.status is status and f"{crossed} of 10000 users" in item.message


@pytest.mark.parametrize(("smallest", "status", "blocks"), [
    pytest.param(99, CheckStatus.WARN, True, id="99-users-warns-and-blocks-ship"),
    pytest.param(100, CheckStatus.PASS, False, id="100-users-is-enough"),
])
def test_minimum_sample(smallest, status, blocks):
    item = sample_item({"control": 5_000, "treatment": smallest})
    assert (item.status, item.blocks_ship) == (status, blocks)
    checklist = healthy(users={"control": 5_000, "treatment": smallest}, total_users=None,
                        crossover_users=None, weights={"control": 5_000,
                                                       "treatment": smallest})
    assert checklist.blocks_ship is blocks


def test_rollup_never_run_with_events_waiting_warns():
    assert rollup_item(None, True, NOW).status is CheckStatus.WARN
    assert rollup_item(NOW - timedelta(hours=48), True, NOW).status is CheckStatus.WARN
    assert rollup_item(NOW - timedelta(hours=48), True, NOW,
                       running=False).status is CheckStatus.PASS


def test_provisional_days_never_warn():
    assert {provisional_item(n).status for n in (0, 1, 30)} == {CheckStatus.INFO}


@pytest.mark.parametrize(("statuses", "overall"), [
    pytest.param([], CheckStatus.PASS, id="nothing-to-check-passes"),
    pytest.param([CheckStatus.INFO, CheckStatus.INFO], CheckStatus.PASS,
                 id="information-only-passes"),
    pytest.param([CheckStatus.PASS, CheckStatus.INFO, CheckStatus.WARN], CheckStatus.WARN,
                 id="one-warning-warns"),
    pytest.param([CheckStatus.WARN, CheckStatus.FAIL, CheckStatus.PASS], CheckStatus.FAIL,
                 id="the-worst-item-wins"),
])
def test_overall_status_is_the_worst_item(statuses, overall):
    items = [HealthItem(f"c{i}", s, "") for i, s in enumerate(statuses)]
    assert overall_status(items) is overall


def test_the_checklist_serialises_as_plain_json_values():
    data = healthy(provisional_days=2).to_dict()
    assert data["status"] == "pass" and data["data_lag_hours"] == 2.0
    assert data["items"][-1] == {"check": "provisional", "status": "info",
                                 "message": provisional_item(2).message, "blocks_ship": False}


def test_users_and_weights_must_name_the_same_arms():
    with pytest.raises(ValueError, match="same arms"):
        healthy(weights={"control": 1.0, "other": 1.0})
