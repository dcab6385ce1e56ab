"""``tracker demo`` logs the users' history before the experiment and prints CUPED-adjusted
results with the variance removed."""

from __future__ import annotations

import re
from datetime import timedelta

from click.testing import CliRunner

from tracker.cli import main
from tracker.demo import DemoConfig, history, pre_period, previous_spec


def test_the_history_comes_before_the_experiment_and_tracks_engagement():
    config = DemoConfig(days=2, users=300, items=400, history_days=3)
    records = history(config)
    start = config.first_day()
    assert records and all(r["occurred_at"] < start for r in records)
    assert min(r["occurred_at"] for r in records) >= start - timedelta(days=3)
    assert history(config) == records  # deterministic for a seed
    assert not history(DemoConfig(days=2, users=300, items=400, history_days=0))


def test_the_pre_period_lists_are_an_earlier_experiments_and_their_clicks_answer_them():
    config = DemoConfig(days=2, users=300, items=400, history_days=3)
    lists, events = pre_period(config)
    spec = previous_spec(config)
    start = config.first_day()
    assert lists and {i["experiment"] for i in lists} == {spec["key"]}
    assert {i["arm"] for i in lists} == set(spec["arms"])
    assert all(start - timedelta(days=3) <= i["served_at"] < start for i in lists)
    served = {(i["user_id"], item) for i in lists for item in i["items"]}
    clicks = [e for e in events if e["event"] == "click"]
    assert clicks and all((e["user_id"], e["item_id"]) in served for e in clicks)


def test_the_demo_prints_cuped_adjusted_results_with_the_variance_removed(db_url):
    result = CliRunner().invoke(main, ["demo", "--days", "3", "--users", "400"],
                                env={"TRACKER_DATABASE_URL": db_url})
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("CUPED on"))
    removed = re.search(r"(\d+)% of the primaries' variance removed", line)
    assert removed and int(removed.group(1)) > 0, line
    assert "var −" in result.stdout
