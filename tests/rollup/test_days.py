"""Reporting days at the edges of what a stored time can hold (pure: no database)."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from tracker.rollup.days import (
    END_INSTANT,
    FIRST_INSTANT,
    HOUR,
    day_bounds,
    day_of,
    days_of_hours,
    in_range,
)

ZONES = st.sampled_from(["UTC", "Pacific/Kiritimati", "Etc/GMT+12", "Asia/Kathmandu",
                         "Europe/Paris", "America/St_Johns", "Australia/Lord_Howe"])
BIGINT = st.integers(min_value=-2**63, max_value=2**63 - 1)
TAKEN = st.integers(min_value=FIRST_INSTANT, max_value=END_INSTANT - 1)


@given(BIGINT, ZONES)
def test_any_bigint_moved_into_the_range_has_a_day_with_bounds_and_neighbours(micros, zone):
    day = day_of(in_range(micros), zone)
    start, end = day_bounds(day, zone)
    assert start < end
    day_bounds(day - timedelta(days=28), zone)  # the popularity window before it
    day_bounds(day + timedelta(days=1), zone)


@given(TAKEN, ZONES)
def test_the_day_of_an_instant_is_among_the_days_of_its_hour(micros, zone):
    hour = micros - micros % HOUR  # floored, below zero too (as the SQL floors it)
    assert day_of(micros, zone) in days_of_hours([hour], zone)
    start, end = day_bounds(day_of(micros, zone), zone)
    assert start <= micros < end


def test_the_range_runs_from_year_2_to_the_end_of_year_9997():
    assert day_of(FIRST_INSTANT, "UTC").isoformat() == "0002-01-01"
    assert day_of(END_INSTANT - 1, "UTC").isoformat() == "9997-12-31"
