"""CUPED's stored covariate sums against a direct computation from the logs (pandas), on both
databases; the covariates are fixed when a user is first seen."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from tests.helpers import T0
from tests.rollup import reference
from tests.rollup.scenario import CUTOFFS, RELEVANCE, WINDOW, create, dump, make_logs
from tracker.store import computed

from .test_rollup import NOW

CUPED_DAYS = 2
NAMES = ("pre_interactions", "pre_graded", "no_pre_period")


def _history(seed: int, users: int = 12) -> list[dict]:
    """Interactions of the days around the experiment's start, logged before it: some inside
    a user's window before first exposure, some too old, some after it; user u11 has none."""
    rng = random.Random(seed)
    events = []
    for n in range(90):
        user = f"u{rng.randrange(users - 1)}"
        at = T0 + timedelta(seconds=rng.randrange(-4 * 86_400, 3 * 86_400))
        events.append({"event_id": f"pre-{n}", "user_id": user, "item_id": f"i{rng.randrange(25)}",
                       "event": rng.choice(list(RELEVANCE)), "occurred_at": at})
    return events


def _expected_covariates(imps: list[dict], history: list[dict]) -> pd.DataFrame:
    """Per user: interactions and graded sum over the CUPED_DAYS before the first impression
    (the first logged; impressions are logged in time order), from the history alone (the
    only interactions received before it), and the no-history indicator."""
    first = pd.DataFrame(imps).groupby("user_id")["served_at"].min()
    events = pd.DataFrame(history)
    events["start"] = events["user_id"].map(first)
    inside = events[(events["occurred_at"] < events["start"])
                    & (events["occurred_at"] >= events["start"] - timedelta(days=CUPED_DAYS))]
    grades = inside.assign(grade=inside["event"].map(RELEVANCE)).groupby("user_id")
    out = pd.DataFrame(index=first.index)
    out["pre_interactions"] = grades.size().reindex(first.index, fill_value=0).astype(float)
    out["pre_graded"] = grades["grade"].sum().reindex(first.index, fill_value=0).astype(float)
    out["no_pre_period"] = (out["pre_interactions"] == 0).astype(float)
    return out


def _expected_sums(x: pd.DataFrame, per_user: dict) -> dict:
    """Per (cumulative, day, arm, metric, k): Σx, Σx_a x_b, Σx·mean, Σx·sum, Σx·impressions."""
    out = {}
    for key, values in per_user.items():
        users = sorted(values)
        xs = x.loc[users, list(NAMES)].to_numpy()
        total = np.array([values[u][0] for u in users])
        count = np.array([values[u][1] for u in users], dtype=float)
        out[key] = {"x": xs.sum(axis=0), "xx": xs.T @ xs, "xy": xs.T @ (total / count),
                    "xs": xs.T @ total, "xm": xs.T @ count}
    return out


def _stored(tracker, cumulative: bool) -> dict:
    frame = computed.covariate_table(tracker.engine, "home", cumulative)
    assert frame.attrs["covariates"] == list(NAMES)
    out = {}
    for _, r in frame.iterrows():
        k = 0 if pd.isna(r["k"]) else int(r["k"])
        out[(cumulative, r["day"], r["arm"], r["metric"], k)] = {
            "x": np.array([r[f"x:{n}"] for n in NAMES]),
            "xx": np.array([[r["xx:" + "*".join(sorted((a, b), key=NAMES.index))]
                             for b in NAMES] for a in NAMES]),
            **{p: np.array([r[f"{p}:{n}"] for n in NAMES]) for p in ("xy", "xs", "xm")}}
    return out


def _log_scenario(tracker, seed: int):
    imps, events = make_logs(seed, days=3, users=12, impressions=60)
    imps.sort(key=lambda r: r["served_at"])
    history = _history(seed)
    late = [dict(e, event_id=f"late-{e['event_id']}") for e in history[:30]]
    create(tracker, cuped_days=CUPED_DAYS)
    tracker.log_interactions(history, on_invalid="all_or_nothing")  # before any impression
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    # the same moments again, received after the users were first seen: not in the covariates
    tracker.log_interactions(late, on_invalid="all_or_nothing")
    return imps, history + events + late, history


@pytest.mark.parametrize("seed", [3, 11])
def test_stored_covariate_sums_equal_a_direct_computation_from_the_logs(tracker, seed):
    imps, interactions, history = _log_scenario(tracker, seed)
    tracker.rollup("home", now=NOW)
    per_user: dict = {}
    reference.rollup(imps, interactions, window=WINDOW, relevance=RELEVANCE, cutoffs=CUTOFFS,
                     per_user_out=per_user)
    x = _expected_covariates(imps, history)
    assert 0 < x["no_pre_period"].sum() < len(x)  # both kinds of user are in the scenario
    expected = _expected_sums(x, per_user)
    stored = _stored(tracker, False) | _stored(tracker, True)
    for key, sums in expected.items():
        for name, value in sums.items():
            np.testing.assert_allclose(stored[key][name], value, rtol=1e-9, atol=1e-9,
                                       err_msg=f"{key} {name}")
    for key in set(stored) - set(expected):  # arms and metrics without users: zeros
        assert not any(np.any(v) for v in stored[key].values()), key


def test_incremental_runs_fix_covariates_at_first_sight_and_equal_a_full_rollup(tracker):
    imps, events = make_logs(5, days=3, users=12, impressions=60)
    imps.sort(key=lambda r: r["served_at"])
    history = _history(5)
    create(tracker, cuped_days=CUPED_DAYS)
    tracker.log_interactions(history, on_invalid="all_or_nothing")
    for part in (imps[:20], imps[20:]):
        tracker.log_impressions(part, on_invalid="all_or_nothing")
        tracker.rollup("home", now=NOW)
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental
    assert incremental["rollup_covariate_sums"]


def test_cuped_days_zero_stores_no_covariates_and_a_new_window_recomputes(tracker):
    imps, events = make_logs(4, days=2, users=10, impressions=30)
    create(tracker, cuped_days=0)
    tracker.log_interactions(_history(4, users=10), on_invalid="all_or_nothing")
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.rollup("home", now=NOW)
    assert computed.covariate_table(tracker.engine, "home").empty
    tracker.update_experiment("home", cuped_days=CUPED_DAYS)  # the next run recomputes all
    (summary,) = tracker.rollup("home", now=NOW)
    assert summary.days_recomputed
    assert not computed.covariate_table(tracker.engine, "home").empty
