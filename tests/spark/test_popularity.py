"""Surprisal's item popularity on Spark (:mod:`tracker.rollup.popularity`): one per
experiment, every interaction of the reference period before its first day. It equals an
independent count; a late click dated inside the experiment recomputes only the days it may
answer; rows that change the popularity (an interaction backfilled into the period,
impressions backfilled before the first day) recompute every day, to the tables of a
from-scratch run. On both databases."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from tests.helpers import T0
from tests.rollup.scenario import create, make_logs
from tests.spark.rollups import assert_same_rows, report_rows, write_lake
from tests.spark.support import SKIP_REASON
from tests.spark.test_rollup import _log, _spark_rollup

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

FIRST_DAY = T0.date()  # make_logs serves from T0 (2026-11-01 12:00 UTC) on
DAYS = [FIRST_DAY + timedelta(days=n) for n in range(5)]  # four times 24 hours from noon


def _event(n: int | str, user: str, item: str, at: datetime, event: str = "click") -> dict:
    return {"event_id": f"extra-{n}", "user_id": user, "item_id": item, "event": event,
            "occurred_at": at}


def _before(imps: list[dict], start: datetime, tag: str) -> list[dict]:
    """Interactions of users the experiment never served (and of one it did) with items it
    serves, a few hours apart from ``start`` on."""
    items = sorted({item for imp in imps for item in imp["items"]})
    users = [f"outsider-{n}" for n in range(5)] + [imps[0]["user_id"]]
    return [_event(f"{tag}-{n}", users[n % len(users)], items[(3 * n) % len(items)],
                   start + timedelta(hours=5 * n), ("click", "view", "save")[n % 3])
            for n in range(12)]


def _surprisal(engine: sa.Engine) -> dict[tuple, tuple]:
    """The surprisal rows: (day, cumulative, arm, k) -> (users, sum)."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT day, cumulative, arm_id, k, users, sum FROM rollup_metric "
            "WHERE metric = 'surprisal'")).all()
    return {(date.fromisoformat(str(r[0])), bool(r[1]), r[2], r[3]): (r[4], r[5])
            for r in rows}  # SQLite gives the day as text


def _changed(before: dict[tuple, tuple], after: dict[tuple, tuple],
             cumulative: bool = False) -> set[date]:
    """The days whose daily (or cumulative) surprisal rows differ."""
    return {key[0] for key in before.keys() | after.keys()
            if key[1] == cumulative and before.get(key) != after.get(key)}


def test_the_popularity_is_every_interaction_of_the_reference_period(spark, tracker,
                                                                     tmp_path):
    """Distinct users per item and N over [first day - 28, first day) in the experiment's
    time zone (Paris: the period starts at 22:00 UTC, summer time, and ends at 23:00 UTC,
    winter time), any user and any event; nothing outside it."""
    from tracker.rollup.popularity import Reference
    from tracker.spark.frames import frames, popularity
    from tracker.spark.lake import read_lake
    from tracker.store.experiments import get_experiment

    create(tracker, timezone="Europe/Paris")
    imps, _ = make_logs(seed=4, days=2, users=6, impressions=20)
    paris = ZoneInfo("Europe/Paris")
    start = datetime(2026, 10, 4, tzinfo=paris).astimezone(UTC)  # 22:00 UTC on the 3rd
    end = datetime(2026, 11, 1, tzinfo=paris).astimezone(UTC)  # 23:00 UTC on 31 October
    edges = [start - timedelta(microseconds=1), start, end - timedelta(microseconds=1), end,
             T0]  # T0: inside the experiment
    events = _before(imps, start - timedelta(hours=7), "pop") + [
        _event(100 + n, f"edge-{n % 2}", "i1", at) for n, at in enumerate(edges)]
    write_lake(tmp_path, imps, events)
    lake = read_lake(spark, tmp_path / "imp", tmp_path / "int")
    with tracker.engine.connect() as conn:
        info = get_experiment(conn, "home")
    f = frames(info, lake.impressions.rows, lake.interactions.rows)

    found = popularity(f, Reference(FIRST_DAY, 28))

    users = defaultdict(set)
    for e in events:
        if start <= e["occurred_at"] < end:
            users[e["item_id"]].add(e["user_id"])
    assert {"outsider-0", "edge-0", "edge-1"} <= set().union(*users.values())
    assert dict(zip(found.items.to_pylist(), found.users.tolist(), strict=True)) == \
        {item: len(who) for item, who in users.items()}
    assert found.n_users == len(set().union(*users.values()))
    assert popularity(f, Reference(date(2026, 9, 1), 28)).n_users == 0


def _two_runs(spark, tracker, tmp_path, later: tuple[list[dict], list[dict]],
              before: list[dict] | None = None):
    """The experiment's four days rolled up (with ``before``, interactions dated before
    them), then ``later`` (impressions, interactions) added in new files and rolled up
    again incrementally: (first summary, second summary, surprisal rows after each)."""
    create(tracker)
    imps, events = make_logs(seed=7, days=4, users=10, impressions=70)
    lake, state = tmp_path / "lake", tmp_path / "state"
    write_lake(lake, imps, events + (before or []), name="first")
    [first] = _spark_rollup(spark, tracker, lake, state=state)
    assert first.full and first.days_recomputed == DAYS
    surprisal = _surprisal(tracker.engine)
    write_lake(lake, *later, name="late", files=1)
    [second] = _spark_rollup(spark, tracker, lake, state=state)
    assert not second.full
    incremental = report_rows(tracker.engine)
    _spark_rollup(spark, tracker, lake, state=tmp_path / "scratch", full=True)
    assert_same_rows(incremental, report_rows(tracker.engine))
    return imps, first, second, surprisal, _surprisal(tracker.engine)


def test_a_late_click_inside_the_experiment_recomputes_only_the_days_it_answers(
        spark, tracker, tmp_path):
    """A click at noon on the second day, logged after the run: its window (6 hours) lies
    in that day, and the popularity does not count it: the days after stay (a window
    before each day recomputed the 28 days after it)."""
    late = [_event(1, "u1", "i3", datetime.combine(DAYS[1], datetime.min.time(), UTC)
                   + timedelta(hours=12))]
    *_, second, before, after = _two_runs(spark, tracker, tmp_path, ([], late))
    assert second.days_recomputed == [DAYS[1]]
    assert _changed(before, after) <= {DAYS[1]}


def test_an_interaction_backfilled_into_the_reference_period_recomputes_every_day(
        spark, tracker, tmp_path):
    """Interactions dated in the 28 days before the first day, logged after the run: the
    popularity changes, so does surprisal on every day, and every day is recomputed."""
    imps, events = make_logs(seed=7, days=4, users=10, impressions=70)
    backfill = _before(imps, T0 - timedelta(days=20), "backfill")
    *_, second, before, after = _two_runs(spark, tracker, tmp_path, ([], backfill))
    assert second.days_recomputed == DAYS
    assert _changed(before, after) == set(DAYS)


def test_an_interaction_backfilled_before_the_reference_period_recomputes_nothing(
        spark, tracker, tmp_path):
    imps, _ = make_logs(seed=7, days=4, users=10, impressions=70)
    backfill = _before(imps, T0 - timedelta(days=60), "old")
    *_, second, before, after = _two_runs(spark, tracker, tmp_path, ([], backfill))
    assert second.days_recomputed == [] and after == before


def test_impressions_backfilled_before_the_first_day_move_the_period(spark, tracker,
                                                                     tmp_path):
    """A list served two days before the first day moves the reference period two days
    earlier: the interactions of the last two days before the first day leave it, so every
    day is recomputed (the new day alone would leave the others with the old popularity,
    which the from-scratch comparison in :func:`_two_runs` catches)."""
    imps, _ = make_logs(seed=7, days=4, users=10, impressions=70)
    recent = _before(imps, T0 - timedelta(days=2), "recent")  # 2.5 days from T0 - 2 on
    early = {**imps[0], "impression_id": "early", "served_at": T0 - timedelta(days=2)}
    _, first, second, before, after = _two_runs(spark, tracker, tmp_path, ([early], []),
                                                before=recent)
    assert second.days_recomputed == [FIRST_DAY - timedelta(days=2), *DAYS]
    assert _changed(before, after) == {FIRST_DAY - timedelta(days=2), *DAYS}


def test_both_engines_count_the_same_reference_period(spark, tracker, tmp_path):
    """The default engine and Spark on logs with interactions before the first day (by the
    experiment's users and others): the same rows."""
    create(tracker, timezone="Europe/Paris")
    imps, events = make_logs(seed=3, days=3, users=14, impressions=90)
    events += _before(imps, T0 - timedelta(days=29), "parity")  # from 10 hours before the
    # period (22:00 UTC on 3 October in Paris) on
    _log(tracker, imps, events)
    tracker.rollup("home", now=datetime(2026, 11, 20, tzinfo=UTC))
    expected = report_rows(tracker.engine)
    write_lake(tmp_path, imps, events, files=3)
    _spark_rollup(spark, tracker, tmp_path, full=True)
    assert_same_rows(report_rows(tracker.engine), expected)


def test_an_erasure_in_the_reference_period_leaves_the_popularity_with_the_lake(
        spark, tracker, tmp_path):
    """``tracker users delete`` of a user whose only interaction lies in the reference
    period marks no day (the default engine drops its stored popularity instead): the Spark
    run counts the popularity from the lake, which changes only when the operator rewrites
    the user's rows out of it, and a changed file is a rebuild: the tables of a lake that
    never held the user. (A history of others in the period: surprisal is defined.)"""
    create(tracker)
    imps, events = make_logs(seed=7, days=4, users=10, impressions=70, history=20)
    erased = _event("erased-1", "erased", imps[0]["items"][0], T0 - timedelta(days=27))
    _log(tracker, imps, [*events, erased])
    lake, state = tmp_path / "lake", tmp_path / "state"
    write_lake(lake, imps, [*events, erased])
    [first] = _spark_rollup(spark, tracker, lake, state=state)
    tracker.delete_user("erased", now=datetime(2026, 11, 20, tzinfo=UTC))
    [second] = _spark_rollup(spark, tracker, lake, state=state)
    assert second.days_recomputed == [] and not second.full
    write_lake(lake, imps, events)  # the same files, rewritten without the user's row
    [third] = _spark_rollup(spark, tracker, lake, state=state)
    assert third.full and third.days_recomputed == first.days_recomputed
    erased_out = _surprisal(tracker.engine)
    _spark_rollup(spark, tracker, lake, state=tmp_path / "scratch", full=True)
    assert _surprisal(tracker.engine) == erased_out
    write_lake(tmp_path / "with", imps, [*events, erased])
    _spark_rollup(spark, tracker, tmp_path / "with", full=True)
    assert _changed(erased_out, _surprisal(tracker.engine)) == set(first.days_recomputed)
