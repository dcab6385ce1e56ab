"""Properties of the scorecard's decisions over any sufficient statistics (pure: the scorecard
is built from tables drawn by Hypothesis, no database): each decision agrees with the rows it
was built from, and a primary's interval reads the same in the decision as in the table."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pandas as pd
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tracker.report import scorecard, shown_interval
from tracker.store.experiments import ArmInfo, ExperimentInfo, Roles

DAY = date(2026, 11, 10)
NOW = datetime(2026, 11, 12, tzinfo=UTC)
ARMS = ("control", "alpha", "beta")
PRIMARY = ("ndcg@10", "hit_rate@10")
GUARDRAILS = {"song_clicks": 0.05}


def _info() -> ExperimentInfo:
    return ExperimentInfo(
        id=1, key="prop", name="prop", description="", status="running", starts_at=None,
        ends_at=None, control="control",
        arms=tuple(ArmInfo(key, 1.0, i + 1) for i, key in enumerate(ARMS)),
        attribution_window=timedelta(hours=24), relevance=None, unknown_events="reject",
        timezone="UTC", cutoffs=(5, 10, 20), created_at=NOW,
        roles=Roles(PRIMARY, dict(GUARDRAILS)))


@st.composite
def experiment(draw) -> dict[str, dict]:
    """Every arm's users and sums for a [0, 1] metric (ndcg), a binary one (hit rate) and a
    positive lower-is-better one (song clicks): one population, each treatment arm shifted by
    an effect (better for all three metrics above 1, worse below)."""
    level = draw(st.floats(0.1, 0.4))
    spread = draw(st.floats(0.2, 0.9))
    rate = draw(st.floats(0.1, 0.5))
    clicks, cv = draw(st.floats(5.0, 50.0)), draw(st.floats(0.2, 1.5))
    out = {}
    for arm in ARMS:
        n = draw(st.integers(2, 4000))
        effect = 1.0 if arm == "control" else draw(st.sampled_from([0.85, 1.0, 1.1, 1.4]))
        mean = min(level * effect, 0.9)
        ndcg_sum = mean * n
        ndcg_sq = ndcg_sum**2 / n + spread * (ndcg_sum - ndcg_sum**2 / n)
        hits = float(min(max(round(rate * effect * n), 1), n - 1))
        click_sum = clicks / effect * n
        out[arm] = {"users": n, "ndcg": (ndcg_sum, ndcg_sq), "hit_rate": (hits, hits),
                    "song_clicks": (click_sum, click_sum**2 / n * (1 + cv * cv))}
    return out


def _tables(arms: dict[str, dict]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    metric_rows, health_rows = [], []
    for arm, s in arms.items():
        for metric, k in (("ndcg", 10), ("hit_rate", 10), ("song_clicks", None)):
            total, squares = s[metric]
            metric_rows.append({"day": DAY, "arm": arm, "metric": metric, "k": k,
                                "kind": "user", "users": s["users"], "sum": total,
                                "sum_sq": squares, "mean": total / s["users"]})
        health_rows.append({"day": DAY, "arm": arm, "users": s["users"], "impressions": 0,
                            "crossover_users": 0, "provisional": False})
    health_rows.append({"day": DAY, "arm": None, "users": sum(s["users"] for s in arms.values()),
                        "impressions": 0, "crossover_users": 0, "provisional": False})
    metrics = pd.DataFrame(metric_rows)
    metrics["k"] = metrics["k"].astype("Int64")
    days = pd.DataFrame([{"day": DAY, "provisional": False}])
    days.attrs.update(last_run=NOW, logged=True)
    return metrics, pd.DataFrame(health_rows), days


def _name(row: dict) -> str:
    return row["metric"] if row["k"] is None else f"{row['metric']}@{row['k']}"


@settings(max_examples=80, deadline=None)
@given(arms=experiment(), target=st.sampled_from([0.05, 0.3, 2.0]))
def test_each_decision_agrees_with_its_rows_and_prints_their_intervals(arms, target):
    metrics, health, days = _tables(arms)
    card = scorecard(_info(), metrics, health, days, now=NOW, target_effect=target,
                     newest_event=NOW - timedelta(hours=2))
    assert [d["arm"] for d in card.decisions] == ["alpha", "beta"]
    small = min(s["users"] for s in arms.values()) < 100
    for decision in card.decisions:
        rows = [r for r in card.metrics if r["arm"] == decision["arm"]]
        primary = [r for r in rows if r["role"] == "primary"]
        guard = [r for r in rows if r["role"] == "guardrail"]
        verdicts = {r["verdict"] for r in primary}
        outcome = decision["outcome"]
        event(outcome)
        if "worse" in verdicts or card.health["status"] == "fail":
            assert outcome == "do_not_ship"
        if outcome == "ship":
            assert "better" in verdicts and all(r["guardrail_ok"] for r in guard)
            assert not small  # the sample check forbids a ship below 100 users an arm
        if outcome == "no_detectable_effect":
            assert verdicts == {"inconclusive"}
            assert all(p["powered"] for p in decision["power"])
        if outcome == "keep_running" and "better" not in verdicts:
            assert small or not all(p["powered"] for p in decision["power"])
        for row in primary:
            if row["decided_on"] != "relative_lift" or row["relative_lift_ci_low"] is None:
                continue
            told = [r for r in decision["reasons"] if r.startswith(_name(row) + " ")]
            for reason in told:  # the same interval as the table's, to the printed digit
                assert reason.startswith(f"{_name(row)} {shown_interval(row)},"), reason
