"""Segments on Spark (issue 33): with list dimensions (``surface``; ``slot``, more values a
day than a day's counts keep) and user dimensions (a ``device`` context key, ``cohort``,
``activity``) declared, the Spark rollup gives the default engine's rows for every slice
(daily, cumulative, by exposure day, CUPED's sums, health), a first-exposure tie included;
incremental runs whose late lists move users' first exposures (so their device slice), or
whose late history moves them to returning, recompute those users' days and end in one
full run's rows; a list's context value and the levels' per-day counts are the default
engine's. On both databases."""

from __future__ import annotations

import json
import random
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.rollup.scenario import assert_same_tables, create, dump
from tests.rollup.test_slices import _sliced_logs
from tests.rollup.test_user_slices import DEVICES, _first_lists
from tests.spark.rollups import write_lake
from tests.spark.support import SKIP_REASON
from tests.spark.test_rollup import NOW, _log, _spark_rollup
from tracker.rollup.levels import NONE, OTHER
from tracker.store import computed

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

SEGMENTS = ["surface:list", "slot:list", "device", "cohort", "activity"]
REPORTED = ("rollup_metric", "rollup_health", "rollup_day", "rollup_exposure_day",
            "rollup_covariate_sums")
"""The tables both engines write alike (the rest is each engine's own state)."""


def _logs(seed: int) -> tuple[list[dict], list[dict]]:
    """Lists with a ``surface`` (a number among them) and a ``device`` drawn per list (so
    a user's first list decides their device slice), users in one arm each, and a history
    of interactions before the experiment (returning users, activity)."""
    imps, events = _sliced_logs(seed, days=3, users=16, impressions=160, history=40)
    rng = random.Random(seed + 100)
    for imp in imps:
        device = rng.choices(list(DEVICES), list(DEVICES.values()))[0]
        imp["context"].pop("device", None)
        if device is not None:
            imp["context"]["device"] = device
        imp["context"]["slot"] = rng.randrange(60)  # more values a day than a day keeps
    return imps, events


def _tie(imps: list[dict]) -> list[dict]:
    """The logs with a user's first list served twice at the same instant, with another
    device and an impression id that sorts first in byte order ("...-10" before "...-9"),
    logged second: the tie goes to the id, not to the order of the logs."""
    first = _first_lists(imps)[imps[0]["user_id"]]
    first["impression_id"] = "tie-9"
    device = "android" if first["context"].get("device") != "android" else "ios"
    return imps + [dict(first, impression_id="tie-10",
                        context={**first["context"], "device": device})]


def _lake(folder, imps: list[dict], events: list[dict], **options) -> None:
    """The records as lake files, each ``context`` as the JSON text the lake holds."""
    write_lake(folder, [{**imp, "context": json.dumps(imp["context"])} for imp in imps],
               events, **options)


def _reported(engine) -> dict[str, list[tuple]]:
    return {table: rows for table, rows in dump(engine).items() if table in REPORTED}


def test_every_slice_of_list_and_user_dimensions_equals_the_default_engines(
        spark, tracker, tmp_path):
    imps, events = _logs(3)
    imps = _tie(imps)
    create(tracker, segments=SEGMENTS, max_levels=2, cuped_days=7)
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    expected = _reported(tracker.engine)
    for name, wanted in (("surface", {"home", "search", OTHER, NONE}),
                         ("device", {"ios", "android", OTHER, NONE}),
                         ("cohort", {"new", "returning"})):
        found = set(computed.metric_table(tracker.engine, "home", segment=name)["slice"])
        assert found == wanted, (name, found)
    assert len(set(computed.metric_table(tracker.engine, "home",
                                         segment="activity")["slice"])) > 1
    _lake(tmp_path, imps, events, files=3)
    [summary] = _spark_rollup(spark, tracker, tmp_path, full=True)
    assert summary.full and summary.days_recomputed
    assert_same_tables(_reported(tracker.engine), expected, rel=1e-9)


def _compare_with_a_full_run(tracker, imps, events) -> None:
    """The tables the incremental runs left equal the default engine's full rollup of the
    same logs (which a full Spark run equals: the test above)."""
    incremental = _reported(tracker.engine)
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW, full=True)
    assert_same_tables(_reported(tracker.engine), incremental, rel=1e-9)


def test_late_first_lists_move_their_users_every_day_to_their_device_slice(
        spark, tracker, tmp_path):
    """The first lists of the users first served on the first day arrive in a later file
    that holds that day only: the run recomputes the later days of those users too."""
    imps, events = _logs(11)  # its device levels stay ios and android: no rebuild
    firsts = {id(imp) for imp in _first_lists(imps).values()}
    first_day = min(imp["served_at"] for imp in imps).date()
    late = [imp for imp in imps if id(imp) in firsts and imp["served_at"].date() == first_day]
    create(tracker, segments=["surface:list", "device"], max_levels=2)
    lake, state = tmp_path / "lake", tmp_path / "state"
    _lake(lake, [imp for imp in imps if imp not in late], events, name="first")
    [first] = _spark_rollup(spark, tracker, lake, state=state)
    _lake(lake, late, [], name="late", files=1)
    [second] = _spark_rollup(spark, tracker, lake, state=state)
    assert first.full and not second.full
    # the late file touches the first day; the moved users' later days are recomputed too
    assert {imp["served_at"].date() for imp in late} == {first_day}
    assert max(second.days_recomputed) > first_day
    [again] = _spark_rollup(spark, tracker, lake, state=state)  # nothing new, nobody moved
    assert again.days_recomputed == []
    _compare_with_a_full_run(tracker, imps, events)


def test_a_history_logged_last_moves_new_users_to_returning_on_every_day(
        spark, tracker, tmp_path, monkeypatch):
    """The interactions before the experiment arrive in a later file: the run recomputes
    the days of the users they make returning (no list is new; the history changes no
    popularity, whose reference period is the day before the first)."""
    imps, events = _logs(8)
    start = min(imp["served_at"] for imp in imps)
    monkeypatch.setenv("TRACKER_ROLLUP_POPULARITY_DAYS", "1")
    tracker.settings = tracker.settings.replace(rollup_popularity_days=1)
    create(tracker, segments=["cohort"], cuped_days=7)
    lake, state = tmp_path / "lake", tmp_path / "state"
    _lake(lake, imps, [e for e in events if e["occurred_at"] >= start], name="first")
    [first] = _spark_rollup(spark, tracker, lake, state=state)
    assert set(computed.metric_table(tracker.engine, "home", segment="cohort").query(
        "users > 0")["slice"]) == {"new"}
    _lake(lake, [], [e for e in events if e["occurred_at"] < start], name="history",
          files=1)
    [second] = _spark_rollup(spark, tracker, lake, state=state)
    assert not second.full and second.days_recomputed == first.days_recomputed
    assert "returning" in set(computed.metric_table(
        tracker.engine, "home", segment="cohort").query("users > 0")["slice"])
    _compare_with_a_full_run(tracker, imps, events)


CONTEXTS = ['{"k": "x"}', '{"k": 7}', '{"k": -2}', '{"k": true}', '{"k": false}',
            '{"k": 1.0}', '{"k": 2.5}', '{"k": 100.0}', '{"k": -3.25}',
            '{"k": {"z": 1}}', '{"k": [1, 2]}', '{"k": null}', '{}', None,
            '{"k": "[not a list"}', '{"other": "x"}', '{"k": ""}', '{"k": "ü ✓"}']


@pytest.mark.parametrize("key", ["k", "k-2"])
def test_a_lists_context_value_is_the_databases(spark, tracker, key):
    """The value of a context key on Spark is what the database's SQL reads from the same
    JSON: strings as themselves, numbers and booleans as JSON writes them, nothing for an
    object, a list, a null or a missing key."""
    from tracker.rollup.queries import context_value as sql_value
    from tracker.spark.slices import context_value

    contexts = [None if c is None else c.replace('"k"', f'"{key}"') for c in CONTEXTS]
    frame = spark.createDataFrame([(n, c) for n, c in enumerate(contexts)],
                                  "n int, context string")
    found = {row["n"]: row["v"] for row in frame.select(
        "n", context_value(key).alias("v")).collect()}
    dialect = tracker.engine.dialect.name
    given = "CAST(:c AS jsonb)" if dialect == "postgresql" else ":c"
    with tracker.engine.connect() as conn:
        expected = {n: conn.execute(sa.text(
            f"SELECT {sql_value(dialect, key)} FROM (SELECT {given} AS context) imp"),
            {"c": c}).scalar() for n, c in enumerate(contexts)}
    assert found == expected
    assert (expected[0], expected[1], expected[5], expected[9]) == ("x", "7", "1.0", None)


def _truncated_logs() -> list[dict]:
    """Five days, each with ten values of ``page`` served three times and ``z`` served twice:
    ``z`` is the most served value over the days (10 against 3), yet below every day's ten
    kept values (``KEPT_PER_DAY`` × ``max_levels`` 1), so each day counts it as ``(other)``
    and the level is ``v00`` (the first of the values served three times)."""
    from tests.helpers import T0

    imps = []
    for day in range(5):
        pages = [f"v{day}{n}" for n in range(10) for _ in range(3)] + ["z", "z"]
        for at, page in enumerate(pages):
            imps.append({"impression_id": f"t-{day}-{at}", "experiment": "home",
                         "arm": "control" if at % 2 else "treatment", "user_id": f"u{at}",
                         "items": ["i1", "i2"], "context": {"page": page},
                         "served_at": T0 + timedelta(days=day, minutes=at)})
    return imps


def _pages_in_both_engines(spark, tracker, folder, imps: list[dict], events: list[dict]
                           ) -> set[str]:
    """The ``page`` slices with users after the default engine's rollup of the logs, whose
    tables a full Spark rollup of the same logs as a lake then gives again."""
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    expected = _reported(tracker.engine)
    slices = set(computed.metric_table(tracker.engine, "home", segment="page")
                 .query("users > 0")["slice"])
    _lake(folder, imps, events, files=1)
    _spark_rollup(spark, tracker, folder, full=True)
    assert_same_tables(_reported(tracker.engine), expected, rel=1e-9)
    return slices


def test_a_value_each_day_counts_as_other_does_not_become_a_level_in_either_engine(
        spark, tracker, tmp_path):
    imps = _truncated_logs()
    events = [{"event_id": "e1", "user_id": "u1", "item_id": "i1", "event": "click",
               "occurred_at": imps[1]["served_at"] + timedelta(minutes=1)}]
    create(tracker, segments=["page:list"], max_levels=1)
    assert _pages_in_both_engines(spark, tracker, tmp_path, imps, events) == {"v00", OTHER}


def test_a_value_too_long_to_name_a_slice_is_other_in_either_engine(spark, tracker, tmp_path):
    from tests.helpers import T0
    from tracker.rollup.levels import LONGEST

    payload = "".join(f"{n:08x}" for n in range(100))  # the most served value
    assert len(payload) > LONGEST
    imps = [{"impression_id": f"p-{at}", "experiment": "home",
             "arm": "control" if at % 2 else "treatment", "user_id": f"u{at}",
             "items": ["i1", "i2"], "context": {"page": payload if at % 3 else "short"},
             "served_at": T0 + timedelta(minutes=at)} for at in range(12)]
    events = [{"event_id": "e1", "user_id": "u1", "item_id": "i1", "event": "click",
               "occurred_at": imps[1]["served_at"] + timedelta(minutes=1)}]
    create(tracker, segments=["page:list"], max_levels=2)
    assert _pages_in_both_engines(spark, tracker, tmp_path, imps, events) == {"short", OTHER}


def test_contexts_that_are_not_json_objects_are_counted_with_an_example(spark):
    """A lake's context that is not a JSON object (broken JSON, a list, a number) puts its
    list in every dimension's (none): the run warns with their count and an example."""
    from tracker.spark.slices import unreadable_contexts

    rows = [("a", '{"device": "ios"}'), ("b", None), ("c", "{not json"), ("d", "[1, 2]"),
            ("e", "7"), ("f", "{}")]
    frame = spark.createDataFrame(rows, "impression_id string, context string")
    assert unreadable_contexts(frame) == (3, "c")
