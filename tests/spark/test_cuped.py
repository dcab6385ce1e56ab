"""CUPED's covariates and the exposure-day view on Spark (local[2]) against the default
engine, on logs with a pre-period history: lists of another experiment and interactions
before first exposure (timed and naming a list), a user without any history, and rows
logged after a user's first exposure that occurred before it (which both engines count:
event time). Both engines give
the same per-user covariates, ``rollup_covariate_sums`` (decoded) and ``rollup_exposure_day``
rows to a relative 1e-9, so ``tracker report`` gives the same CUPED-adjusted scorecard;
an incremental Spark run gives the tables of a from-scratch one. On both databases."""

from __future__ import annotations

import math
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from tests.helpers import T0
from tests.rollup.scenario import CUTOFFS, create, make_logs
from tests.rollup.test_covariates import _history, _previous
from tests.spark.support import SKIP_REASON
from tracker.lake.export import export_logs
from tracker.report import report
from tracker.rollup.covariates import UserCovariates, names_for
from tracker.store import computed

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

NOW = datetime(2026, 11, 20, tzinfo=UTC)  # long after the logs: every day final
CUPED_DAYS = 2
CUT = T0 + timedelta(days=1, hours=15)


def _log(tracker, imps, events) -> None:
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")


def _batches(seed: int):
    """Two logging batches: (1) the history (another experiment's lists and their
    interactions, interactions around the start) and "home" before ``CUT``; (2) the rest of
    "home", then rows logged after every first exposure that occurred (or were served)
    inside a window: a click of u1 and a list of u2."""
    imps, events = make_logs(seed, days=3, users=12, impressions=70)
    other_imps, other_events = _previous(seed)
    history = _history(seed)
    late = ([{"impression_id": "other-late", "experiment": "other", "arm": "control",
              "user_id": "u2", "items": ["i1", "i2", "i3"],
              "served_at": T0 - timedelta(hours=6)}],
            [{"event_id": "late-click", "user_id": "u1", "item_id": "i4", "event": "click",
              "occurred_at": T0 - timedelta(hours=20)},
             {"event_id": "late-answer", "user_id": "u2", "item_id": "i2", "event": "save",
              "occurred_at": T0 - timedelta(hours=5)}])
    first = [(other_imps, other_events + history),
             ([i for i in imps if i["served_at"] < CUT], [e for e in events
                                                          if e["occurred_at"] < CUT])]
    second = [([i for i in imps if i["served_at"] >= CUT], [e for e in events
                                                            if e["occurred_at"] >= CUT]),
              late]
    return first, second


def _spark_rollup(spark, tracker, lake: Path, state: Path, **options):
    from tracker.spark.rollup import rollup

    return rollup(spark, lake / "imp", lake / "int", experiment="home", state=state,
                  database_url=tracker.engine.url.render_as_string(hide_password=False),
                  now=NOW, buckets=2, **options)


def _outcome(tracker) -> dict:
    """What CUPED and the exposure-day view leave for the report: the covariate sums (both
    views, decoded), the exposure-day rows, and the scorecard (CUPED on)."""
    sums = {}
    for cumulative in (False, True):
        frame = computed.covariate_table(tracker.engine, "home", cumulative)
        frame = frame.sort_values(["day", "arm", "metric", "k"]).reset_index(drop=True)
        sums[cumulative] = frame.astype({"k": "float"}).fillna(-1).to_dict("records")
    with tracker.engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT * FROM rollup_exposure_day ORDER BY day, exposure_day, arm_id, metric, k"
        )).mappings()
        days = [{k: v for k, v in r.items() if k not in ("id", "computed_at")} for r in rows]
    card = report(tracker.engine, "home", now=NOW).to_dict()
    card = {key: card[key] for key in ("cuped", "metrics", "decisions", "trends")}
    return {"sums": sums, "exposure_day": days, "card": card}


def _forget(tracker) -> None:
    """Drop what the default engine wrote for CUPED and the exposure-day view, so that what
    the report reads next can only come from the Spark run."""
    with tracker.engine.begin() as conn:
        for table in ("rollup_covariate_sums", "rollup_user_covariates", "rollup_exposure_day",
                      "rollup_first_seen"):
            conn.execute(sa.text(f"DELETE FROM {table}"))
        conn.execute(sa.text("UPDATE rollup_checkpoint SET covariates = NULL"))


def _default_covariates(tracker) -> dict[str, list[float]]:
    from tracker.rollup.stored_covariates import Stored
    from tracker.store.experiments import get_experiment

    with tracker.engine.connect() as conn:
        return _by_user(Stored.open(conn, get_experiment(conn, "home"),
                                    names_for(CUTOFFS)).subset(None))


def _spark_covariates(state: Path) -> dict[str, list[float]]:
    table = pq.read_table(state / "home" / "covariates.parquet")
    names = names_for(CUTOFFS)
    return {user: [table[n][i].as_py() for n in names]
            for i, user in enumerate(table["user_id"].to_pylist())}


def _by_user(covariates: UserCovariates) -> dict[str, list[float]]:
    return dict(zip(covariates.users.to_pylist(), covariates.x.tolist(), strict=True))


def assert_close(got, expected, where: str = "") -> None:
    """Equal structure, strings and integers; floats to a relative 1e-9."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), where
        for key in expected:
            assert_close(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list | tuple):
        assert len(got) == len(expected), where
        for n, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
            assert_close(mine, theirs, f"{where}[{n}]")
    elif isinstance(expected, float) and not isinstance(got, bool):
        assert (math.isnan(got) and math.isnan(expected)) or math.isclose(
            got, expected, rel_tol=1e-9, abs_tol=1e-12), (where, got, expected)
    else:
        assert got == expected, (where, got, expected)


def _export(tracker, lake: Path, taken: set[str] | None = None) -> set[str]:
    """Add the database's logs (as ``tracker export`` writes them, ``received_at`` included)
    to ``lake``: every row, or those whose id is not in ``taken``; returns every id."""
    staging = lake.parent / f"{lake.name}-export"
    export_logs(tracker.engine, staging / "imp", staging / "int", overwrite=True)
    ids = set()
    for log, key in (("imp", "impression_id"), ("int", "event_id")):
        table = ds.dataset(staging / log, format="parquet", partitioning=None).to_table()
        ids |= set(table[key].to_pylist())
        if taken is not None:
            keep = [value not in taken for value in table[key].to_pylist()]
            table = table.filter(pa.array(keep))
        target = lake / log / f"part-{len(taken or ())}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, target)
    shutil.rmtree(staging)
    return ids


def _all_logged(tracker, seed: int) -> None:
    create(tracker, cuped_days=CUPED_DAYS)
    create(tracker, "other")
    first, second = _batches(seed)
    for imps, events in first + second:
        _log(tracker, imps, events)


def _check_the_history_matters(outcome: dict, covariates: dict[str, list[float]]) -> None:
    """The fixture exercises what it claims (else the parity proves little)."""
    names = names_for(CUTOFFS)
    no_lists, no_period = names.index("no_pre_lists"), names.index("no_pre_period")
    assert covariates["u11"][no_lists] == 1.0 and covariates["u11"][no_period] == 1.0
    assert sum(1 for x in covariates.values() if x[no_lists] == 0.0) >= 5
    assert outcome["card"]["cuped"] and outcome["exposure_day"]
    assert max(row["variance_reduction"] for row in outcome["card"]["metrics"]
               if row.get("variance_reduction") is not None) > 0.05


@pytest.mark.parametrize("seed", [3, 8], ids=["seed-3", "seed-8"])
def test_both_engines_give_the_same_covariates_sums_exposure_days_and_report(
        spark, tracker, tmp_path, seed):
    _all_logged(tracker, seed)
    tracker.rollup("home", now=NOW)
    expected, expected_x = _outcome(tracker), _default_covariates(tracker)
    _check_the_history_matters(expected, expected_x)
    _export(tracker, tmp_path / "lake")
    _forget(tracker)
    [summary] = _spark_rollup(spark, tracker, tmp_path / "lake", tmp_path / "state", full=True)
    assert summary.full
    assert_close(_spark_covariates(tmp_path / "state"), expected_x, "covariates")
    assert_close(_outcome(tracker), expected, "outcome")


def test_the_lakes_receipt_time_plays_no_part_on_spark(spark, tracker, tmp_path):
    """Event time: with or without ``received_at`` in the lake, Spark's covariates are the
    default engine's, u1's late click and u2's late list and its answer included."""
    _all_logged(tracker, 3)
    tracker.rollup("home", now=NOW)
    expected_x = _default_covariates(tracker)
    _export(tracker, tmp_path / "lake")
    for log in ("imp", "int"):
        path = tmp_path / "lake" / log / "part-0.parquet"
        pq.write_table(pq.read_table(path).drop_columns(["received_at"]), path)
    _spark_rollup(spark, tracker, tmp_path / "lake", tmp_path / "state", full=True)
    got = _spark_covariates(tmp_path / "state")
    names = names_for(CUTOFFS)
    count = names.index("pre_interactions")
    assert got.keys() == expected_x.keys()
    assert got["u1"][count] >= 1  # the late click counts
    for user in got:
        assert got[user] == pytest.approx(expected_x[user], rel=1e-9), user


def _first_batches_logged(tracker, cuped_days: int) -> list:
    """Two experiments, the first batches of their logs and a save by ``u-new`` long before
    its first exposure (logged later by the caller); the second batches, to log later."""
    create(tracker, cuped_days=cuped_days)
    create(tracker, "other")
    first, second = _batches(5)
    for imps, events in first:
        _log(tracker, imps, events)
    tracker.log_interactions([{"event_id": "new-before", "user_id": "u-new", "item_id": "i9",
                               "event": "save", "occurred_at": T0 + timedelta(days=2)}],
                             on_invalid="all_or_nothing")
    return second


def test_an_incremental_spark_run_gives_the_tables_of_a_from_scratch_run(spark, tracker,
                                                                         tmp_path):
    second = _first_batches_logged(tracker, CUPED_DAYS)
    lake, state = tmp_path / "lake", tmp_path / "state"
    taken = _export(tracker, lake)
    [one] = _spark_rollup(spark, tracker, lake, state)
    assert one.full
    for imps, events in second:
        _log(tracker, imps, events)
    taken = _export(tracker, lake, taken)
    [two] = _spark_rollup(spark, tracker, lake, state)
    assert not two.full and two.days_recomputed
    # a new user on the last day only (with a click in the window, logged long before):
    # the exposure-day rows from that day on start from the stored first-seen users
    _log(tracker, [{"impression_id": "home-new", "experiment": "home", "arm": "control",
                    "user_id": "u-new", "items": ["i1", "i2"],
                    "served_at": T0 + timedelta(days=2, hours=20)}],
         [{"event_id": "new-click", "user_id": "u-new", "item_id": "i2", "event": "click",
           "occurred_at": T0 + timedelta(days=2, hours=20, minutes=5)}])
    taken = _export(tracker, lake, taken)
    seen = {p.name: p.stat().st_mtime_ns for p in (state / "home" / "first_seen").iterdir()}
    [three] = _spark_rollup(spark, tracker, lake, state)
    assert not three.full and min(three.days_recomputed) > min(one.days_recomputed)
    kept = {p.name: p.stat().st_mtime_ns for p in (state / "home" / "first_seen").iterdir()
            if p.name < f"{min(three.days_recomputed).isoformat()}.parquet"}
    assert kept and kept.items() <= seen.items()  # read, not rebuilt from the first day
    _check_from_scratch(spark, tracker, lake, state, tmp_path / "scratch")


def _check_from_scratch(spark, tracker, lake: Path, state: Path, scratch: Path) -> None:
    """The tables and covariates of the incremental runs into ``state`` equal those of one
    Spark run from scratch, and the default engine's on the same logs."""
    incremental, incremental_x = _outcome(tracker), _spark_covariates(state)
    _spark_rollup(spark, tracker, lake, scratch, full=True)
    assert_close(_outcome(tracker), incremental, "from scratch")
    assert_close(_spark_covariates(scratch), incremental_x, "covariates")
    tracker.rollup("home", now=NOW, full=True)
    assert_close(incremental, _outcome(tracker), "default engine")
