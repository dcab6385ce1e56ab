"""Experiment lifecycle, user erasure and log retention (tracker.lifecycle), on both databases."""

from __future__ import annotations

import json
import threading
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import sqlalchemy as sa

from tests.helpers import T0, count
from tests.rollup.scenario import create, dump, make_logs
from tracker.errors import Busy, ExpiredLogs, InvalidTransition, ValidationError
from tracker.rollup.cells import assignment_of, is_crossed
from tracker.rollup.lock import rollup_lock
from tracker.rollup.stores import unpack

NOW = datetime(2026, 11, 20, tzinfo=UTC)  # long after the logs: every day final


def _logged(tracker, key: str = "home", seed: int = 3, days: int = 3, users: str = "",
            **options):
    """An experiment with logs (and interactions before them: surprisal's reference period,
    CUPED's pre-period); ``users``: a prefix that keeps its users apart."""
    create(tracker, key, **options)
    imps, events = make_logs(seed, days=days, key=key, history=20)
    for record in imps + events:
        record["user_id"] = users + record["user_id"]
    assert not tracker.log_impressions(imps).rejected
    assert not tracker.log_interactions(events).rejected
    return imps, events


KEYED = ("rollup_user_totals", "rollup_user_covariates")  # one row per user


def _blob_users(engine: sa.Engine, table: str) -> set[str]:
    """Every user id held in ``table``: its ``user_id`` column (a table keyed by user,
    :data:`KEYED`), or its Arrow state blobs (read with pyarrow alone)."""
    found: set[str] = set()
    with engine.connect() as conn:
        if table in KEYED:
            return set(conn.execute(sa.text(f"SELECT user_id FROM {table}")).scalars())
        for (data,) in conn.execute(sa.text(f"SELECT data FROM {table}")):
            column = pa.ipc.open_stream(pa.py_buffer(bytes(data))).read_all()["user_id"]
            found |= {str(v) for v in column.to_pylist()}
    return found


def _raw_users(engine: sa.Engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.text(
            "SELECT user_id FROM impression UNION SELECT user_id FROM interaction")).scalars())


# ---------------------------------------------------------------------------- statuses
def test_a_stopped_experiment_rejects_impressions_and_still_takes_its_interactions(tracker):
    create(tracker, relevance={"like": 1})  # the only experiment mapping "like"
    create(tracker, "other")
    tracker.stop_experiment("home")
    records = [
        {"impression_id": "a", "experiment": "home", "arm": "control", "user_id": "u1",
         "items": ["i1"], "served_at": T0},
        {"impression_id": "b", "experiment": "other", "arm": "control", "user_id": "u1",
         "items": ["i1"], "served_at": T0},
    ]
    for source in (records, pd.DataFrame(records)):  # the per-record and the columnar path
        result = tracker.log_impressions(source)
        assert [(r.id, r.field) for r in result.rejected] == [("a", "experiment")]
        assert "'home' is stopped: it takes no new impressions" in result.rejected[0].reason
    with pytest.raises(ValidationError, match="is stopped"):
        tracker.log_impression(**dict(records[0], impression_id="a2"))
    assert count(tracker.engine, "impression") == 1  # the neighbour
    # its event types still come in: they answer the lists served before the stop
    tracker.log_interaction(user_id="u1", item_id="i1", event="like", occurred_at=T0)
    assert count(tracker.engine, "interaction") == 1


def test_a_restarted_experiment_takes_impressions_again(tracker):
    create(tracker)
    tracker.stop_experiment("home")
    assert tracker.start_experiment("home").status == "running"
    tracker.log_impression(experiment="home", arm="control", user_id="u", items=["i"],
                           served_at=T0)
    assert count(tracker.engine, "impression") == 1


@pytest.mark.parametrize(("start", "target", "message"), [
    pytest.param("running", "archived", "stop it first", id="archive-a-running-one"),
    pytest.param("draft", "archived", "a draft never ran", id="archive-a-draft"),
    pytest.param("draft", "stopped", "nothing to stop", id="stop-a-draft"),
    pytest.param("archived", "running", "archived experiment is final", id="restart-an-archived"),
    pytest.param("archived", "stopped", "archived, which is final", id="stop-an-archived"),
])
def test_transitions_that_make_no_sense_are_refused(tracker, start, target, message):
    create(tracker, status=start)
    move = {"running": tracker.start_experiment, "stopped": tracker.stop_experiment,
            "archived": tracker.archive_experiment}[target]
    with pytest.raises(InvalidTransition, match=message):
        move("home")
    assert tracker.experiment("home").status == start


def test_asking_for_the_status_it_has_changes_nothing(tracker):
    create(tracker, status="stopped")
    assert tracker.stop_experiment("home").status == "stopped"


def test_archiving_needs_the_impressions_rolled_up_and_hides_it_from_the_lists(tracker):
    _logged(tracker)
    create(tracker, "other")
    tracker.stop_experiment("home")
    with pytest.raises(InvalidTransition, match="tracker rollup home"):
        tracker.archive_experiment("home")
    tracker.rollup("home", now=NOW)
    assert tracker.archive_experiment("home").status == "archived"
    assert [e.key for e in tracker.experiments()] == ["other"]
    assert [e.key for e in tracker.experiments(include_archived=True)] == ["home", "other"]
    assert tracker.experiment("home").status == "archived"  # still readable by key


def test_the_rollup_of_every_experiment_skips_an_archived_one_until_it_has_work(tracker):
    imps, _ = _logged(tracker)
    tracker.rollup(now=NOW)
    tracker.stop_experiment("home")
    tracker.archive_experiment("home")
    assert tracker.rollup(now=NOW) == []
    tracker.delete_user(imps[0]["user_id"], now=NOW)  # marks days of the archived experiment
    (summary,) = tracker.rollup(now=NOW)
    assert summary.experiment == "home" and summary.days_recomputed
    assert tracker.rollup(now=NOW) == []
    assert [s.experiment for s in tracker.rollup("home", now=NOW)] == ["home"]  # named: runs


# ---------------------------------------------------------------------------- delete experiment
def test_deleting_an_experiment_removes_its_rows_and_leaves_the_others(tracker):
    _logged(tracker)
    _logged(tracker, "other", seed=4)
    tracker.rollup(now=NOW)
    other_before = {t: rows for t, rows in dump(tracker.engine).items()}
    home_id = tracker.experiment("home").id
    with tracker.engine.connect() as conn:
        own = conn.execute(sa.text("SELECT count(*) FROM impression WHERE experiment_id = :e"),
                           {"e": home_id}).scalar_one()
    interactions = count(tracker.engine, "interaction")
    removal = tracker.delete_experiment("home")
    assert removal.rows["impression"] == own and removal.rows["arm"] == 2
    assert removal.rows["rollup_day"] == 4 and removal.rows["rollup_metric"] > 0
    assert [e.key for e in tracker.experiments(include_archived=True)] == ["other"]
    assert count(tracker.engine, "interaction") == interactions  # they belong to users
    with tracker.engine.connect() as conn:
        for table in ("impression", "rollup_day", "rollup_metric", "rollup_units",
                      "rollup_state", "rollup_popularity", "arm", "catalog_item"):
            left = conn.execute(sa.text(f"SELECT count(*) FROM {table} "
                                        "WHERE experiment_id = :e"), {"e": home_id})
            assert left.scalar_one() == 0, table
    after = dump(tracker.engine)
    for table, rows in other_before.items():
        assert after[table] == [r for r in rows if dict(r)["experiment_id"] != home_id]


def test_an_experiment_is_not_deleted_while_its_rollup_runs(tracker):
    _logged(tracker)
    info = tracker.experiment("home")
    with rollup_lock(tracker.engine, info.id, "home"), pytest.raises(Busy):
        tracker.delete_experiment("home")
    assert tracker.experiment("home").key == "home"


# ---------------------------------------------------------------------------- erasure
def test_erasing_a_user_then_rolling_up_equals_a_full_rollup_without_them(tracker):
    imps, events = _logged(tracker)
    _logged(tracker, "other", seed=5, users="other-")
    tracker.rollup(now=NOW)
    user = imps[0]["user_id"]
    assert user in _blob_users(tracker.engine, "rollup_units")
    assert user in _blob_users(tracker.engine, "rollup_user_covariates")
    assert user in _blob_users(tracker.engine, "rollup_user_totals")
    erasure = tracker.delete_user(user, now=NOW)
    assert erasure.impressions == sum(r["user_id"] == user for r in imps)
    assert erasure.interactions == sum(r["user_id"] == user for r in events)
    parts = {p.experiment: p for p in erasure.experiments}
    assert parts["home"].impressions == erasure.impressions and parts["home"].days_marked
    assert "other" not in parts  # the user never saw it: none of its days is marked
    # but their clicks before the first day counted in its item popularity (surprisal):
    # it is counted again, and every day recomputed
    first = datetime.combine(min(r["served_at"] for r in imps).date(), datetime.min.time(),
                             tzinfo=UTC)
    assert any(e["user_id"] == user and e["occurred_at"] < first for e in events)
    for summary in tracker.rollup(now=NOW):
        if summary.experiment == "home":
            assert set(parts["home"].days_marked) <= set(summary.days_recomputed)
        else:
            assert summary.days_recomputed == sorted(_days(tracker, "other"))
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    tracker.rollup("other", full=True, now=NOW)
    assert dump(tracker.engine) == incremental
    assert user not in _raw_users(tracker.engine)
    for table in ("rollup_units", *KEYED):
        assert user not in _blob_users(tracker.engine, table), table


def test_an_erasure_recomputes_a_day_whose_windows_are_still_open(tracker):
    imps, _ = _logged(tracker, days=1)
    early = max(r["served_at"] for r in imps) + timedelta(minutes=1)  # windows still open
    tracker.rollup(now=early)
    user = imps[0]["user_id"]
    tracker.delete_user(user, now=early)
    (summary,) = tracker.rollup(now=early)
    assert {r["served_at"].date() for r in imps if r["user_id"] == user} <= \
        set(summary.days_recomputed)
    assert user not in _blob_users(tracker.engine, "rollup_units")
    table = tracker.metric_table("home")
    assert table[table["day"] == max(table["day"])]["provisional"].all()  # still open
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=early)
    assert dump(tracker.engine) == incremental


def test_new_rows_after_erasing_the_newest_ones_are_still_rolled_up(tracker):
    # SQLite hands a new row the highest id + 1: erasing the newest rows must not make the
    # rollup take the next ones for already seen
    create(tracker)
    first = {"impression_id": "a", "experiment": "home", "arm": "control", "user_id": "keep",
             "items": ["i1", "i2"], "served_at": T0}
    tracker.log_impressions([first, dict(first, impression_id="b", user_id="gone")])
    tracker.rollup(now=NOW)
    tracker.delete_user("gone", now=NOW)
    tracker.log_impressions([dict(first, impression_id="c", user_id="new")])
    tracker.rollup(now=NOW)
    health = tracker.health_table("home")
    assert health[health["arm"] == "control"]["users"].tolist() == [2]  # keep and new
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental


def test_an_erasure_waits_for_a_running_rollup_then_marks_its_days(tracker):
    # a rollup that read the user's rows before they went publishes its days afterwards:
    # the marks must come after it, or they would be overwritten
    imps, _ = _logged(tracker)
    tracker.rollup(now=NOW)
    info = tracker.experiment("home")
    done = threading.Event()

    def erase() -> None:
        tracker.delete_user(imps[0]["user_id"], now=NOW)
        done.set()

    with rollup_lock(tracker.engine, info.id, "home"):
        worker = threading.Thread(target=erase)
        worker.start()
        assert not done.wait(1.0)
        assert imps[0]["user_id"] not in _raw_users(tracker.engine)  # the rows went first
        with tracker.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM rollup_day "
                                        "WHERE computed_at < closes_at")).scalar_one() == 0
    worker.join(60)
    assert done.is_set()
    with tracker.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM rollup_day "
                                    "WHERE computed_at < closes_at")).scalar_one() > 0


@pytest.mark.parametrize("step", [
    pytest.param(("day", 1), id="erased-while-the-first-day-is-computed"),
    pytest.param(("day", 3), id="erased-while-the-last-day-is-computed"),
])
def test_a_user_erased_while_a_rollup_computes_days_for_the_first_time_leaves_no_trace(
        tracker, step):
    # the rollup has read the user's rows; the erasure deletes them while it computes days
    # that have no results yet; after it and the next rollup the tables equal a rebuild
    # without the user, and no stored state holds their id
    from tracker.rollup.engine import run_rollup

    imps, _ = _logged(tracker, days=3)
    user = imps[0]["user_id"]
    paused, resume, erased = threading.Event(), threading.Event(), threading.Event()

    def progress(stage, done, total, day) -> None:
        if (stage, done) == step and not paused.is_set():
            paused.set()
            assert resume.wait(60)

    def roll() -> None:
        run_rollup(tracker.engine, tracker.settings, "home", now=NOW, progress=progress)

    def erase() -> None:
        tracker.delete_user(user, now=NOW)
        erased.set()

    rollup = threading.Thread(target=roll)
    rollup.start()
    assert paused.wait(120)
    eraser = threading.Thread(target=erase)
    eraser.start()
    deadline = threading.Event()
    for _ in range(600):  # the rows go at once; the marks wait for the rollup's lock
        if user not in _raw_users(tracker.engine):
            break
        deadline.wait(0.1)
    assert user not in _raw_users(tracker.engine)
    resume.set()
    rollup.join(120)
    eraser.join(120)
    assert erased.is_set() and not rollup.is_alive()
    tracker.rollup(now=NOW)
    incremental = dump(tracker.engine)
    for table in ("rollup_units", *KEYED, "rollup_first_seen"):
        assert user not in _blob_users(tracker.engine, table), table
    tracker.rollup("home", full=True, now=NOW)
    assert dump(tracker.engine) == incremental


def test_erasing_an_unknown_user_removes_nothing(tracker):
    _logged(tracker)
    tracker.rollup(now=NOW)
    before = dump(tracker.engine)
    erasure = tracker.delete_user("nobody", now=NOW)
    assert (erasure.impressions, erasure.interactions, erasure.experiments) == (0, 0, ())
    assert dump(tracker.engine) == before
    with pytest.raises(ValidationError, match="non-empty string"):
        tracker.delete_user("")


# ---------------------------------------------------------------------------- retention
def _days(tracker, key: str = "home") -> dict[date, float]:
    table = tracker.metric_table(key)
    rows = table[(table["metric"] == "hit_rate") & (table["k"] == 5)]
    return dict(zip(rows["day"], rows["sum"], strict=True))


def test_expired_logs_keep_their_results_and_their_days_are_never_recomputed(tracker):
    imps, events = _logged(tracker, days=3)
    tracker.rollup(now=NOW)
    before = dump(tracker.engine)
    # cutoff inside the second day (T0 is noon): days 1-2 lose logs, no run recomputes them
    cutoff = T0 + timedelta(days=1)
    expiry = tracker.expire_logs(NOW - cutoff, now=NOW)
    assert expiry.impressions == sum(r["served_at"] < cutoff for r in imps)
    assert expiry.interactions == sum(r["occurred_at"] < cutoff for r in events)
    after = dump(tracker.engine)
    for table in ("rollup_metric", "rollup_health", "rollup_day"):
        assert after[table] == before[table], table  # the report reads the same
    # a late click on an expired day changes nothing
    tracker.log_interaction(user_id=imps[0]["user_id"], item_id=imps[0]["items"][0],
                            event="purchase", occurred_at=imps[0]["served_at"] +
                            timedelta(minutes=1))
    (summary,) = tracker.rollup(now=NOW)
    assert summary.days_recomputed == []
    assert {t: dump(tracker.engine)[t] for t in ("rollup_metric", "rollup_day")} == \
        {t: before[t] for t in ("rollup_metric", "rollup_day")}
    with pytest.raises(ExpiredLogs, match="full rebuild"):
        tracker.rollup("home", full=True, now=NOW)
    with pytest.raises(ExpiredLogs, match="catalog declaration"):  # it asks for a rebuild
        tracker.declare_catalog("home", ["i1"])
    assert tracker.catalog("home") == []
    assert tracker.declare_catalog("home", None) == 0  # none declared, none asked: no change
    assert tracker.rollup(now=NOW)[0].days_recomputed == []
    assert dump(tracker.engine)["rollup_metric"] == before["rollup_metric"]


def test_a_cuped_days_change_that_needs_expired_logs_is_refused_before_it_is_stored(tracker):
    _logged(tracker, days=3)
    tracker.rollup(now=NOW)
    tracker.expire_logs(NOW - (T0 + timedelta(days=1)), now=NOW)
    before = dump(tracker.engine)
    with pytest.raises(ExpiredLogs, match=r"new cuped_days \(3\)"):
        tracker.update_experiment("home", cuped_days=3)
    assert tracker.experiment("home").cuped_days == 14  # not stored
    # other settings still change, and the experiment keeps rolling up
    tracker.update_experiment("home", name="Home feed")
    (summary,) = tracker.rollup(now=NOW)
    assert summary.days_recomputed == []
    assert dump(tracker.engine)["rollup_metric"] == before["rollup_metric"]


def test_the_cli_refuses_a_cuped_days_change_after_expiry_in_one_line(tracker, db_url):
    from click.testing import CliRunner

    from tracker.cli import main

    _logged(tracker, days=3)
    tracker.rollup(now=NOW)
    tracker.expire_logs(NOW - (T0 + timedelta(days=1)), now=NOW)
    result = CliRunner().invoke(main, ["experiments", "update", "home", "--cuped-days", "3"],
                                env={"TRACKER_DATABASE_URL": db_url})
    assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    assert "cuped_days" in result.output and "refused" in result.output
    assert tracker.experiment("home").cuped_days == 14


def test_days_after_the_horizon_are_still_rolled_up_with_the_stored_popularity(tracker):
    imps, events = _logged(tracker, days=4)
    tracker.rollup(now=NOW)
    surprisal = _surprisal(tracker)
    tracker.expire_logs(NOW - (T0 + timedelta(days=1)), now=NOW)
    last = max((r for r in imps if r["served_at"].date() == T0.date() + timedelta(days=3)),
               key=lambda r: r["served_at"])
    late = {"event_id": "late", "user_id": last["user_id"], "item_id": last["items"][0],
            "event": "purchase", "occurred_at": last["served_at"] + timedelta(minutes=1)}
    early = {"event_id": "early", "user_id": imps[0]["user_id"],
             "item_id": imps[0]["items"][0], "event": "purchase",
             "occurred_at": imps[0]["served_at"] + timedelta(minutes=1)}
    tracker.log_interactions([late, early])
    (summary,) = tracker.rollup(now=NOW)
    horizon = T0.date() + timedelta(days=2)  # the first whole day after the cutoff
    assert summary.days_recomputed == [T0.date() + timedelta(days=3)] and horizon < \
        T0.date() + timedelta(days=3)  # the early click's day lies before the horizon
    # the reference period's logs expired, its popularity stayed: the recomputed day's
    # surprisal (which the ground truth does not enter) is the one computed before
    assert _surprisal(tracker) == surprisal and all(n > 0 for n, _ in surprisal.values())


def _surprisal(tracker) -> dict[tuple[date, str], tuple[int, float]]:
    table = tracker.metric_table("home")
    rows = table[(table["metric"] == "surprisal") & (table["k"] == 5)]
    return {(d, a): (int(n), float(v)) for d, a, n, v in
            zip(rows["day"], rows["arm"], rows["users"], rows["sum"], strict=True)}


def test_expiry_drops_the_per_user_state_no_run_reads_and_keeps_the_results(tracker):
    imps, _ = _logged(tracker, days=3)
    tracker.rollup(now=NOW)
    before = dump(tracker.engine)
    tracker.expire_logs(timedelta(days=1), now=NOW)  # everything
    assert count(tracker.engine, "impression") == 0
    with tracker.engine.connect() as conn:
        kept = conn.execute(sa.text("SELECT day, cumulative FROM rollup_units")).all()
        checkpoint = conn.execute(sa.text("SELECT day FROM rollup_checkpoint")).scalars().all()
        users = conn.execute(sa.text("SELECT user_id FROM rollup_user_totals")).scalars().all()
    # no daily units; the checkpoint of the last day (where a next cumulative pass would
    # start), with every user's totals
    assert kept == []
    assert [pd.Timestamp(d).date() for d in checkpoint] == \
        [max(r["served_at"] for r in imps).date()]
    assert sorted(users) == sorted({r["user_id"] for r in imps})
    assert count(tracker.engine, "rollup_popularity") == 1  # its logs are gone: kept
    assert dump(tracker.engine)["rollup_metric"] == before["rollup_metric"]


def test_expiry_refuses_while_older_impressions_are_not_rolled_up(tracker):
    _logged(tracker)
    with pytest.raises(ExpiredLogs, match="run `tracker rollup` first"):
        tracker.expire_logs(timedelta(days=1), now=NOW)
    assert count(tracker.engine, "impression") > 0
    preview = (tracker.rollup(now=NOW), tracker.expire_logs(timedelta(days=1), now=NOW,
                                                            dry_run=True))[1]
    assert preview.dry_run and preview.impressions == count(tracker.engine, "impression")


def test_expiry_refuses_while_a_day_an_erasure_marked_waits_for_its_rollup(tracker):
    """An erasure deletes the stored rows of the days it marks, which the next rollup
    recomputes from the logs: an expiry whose cutoff could reach one of them first is
    refused (its logs would go, and nothing could recompute it), and goes ahead once the
    rollup ran, whose tables then equal a full rollup of the remaining logs."""
    imps, _ = _logged(tracker)
    tracker.rollup(now=NOW)
    gone = imps[0]["user_id"]
    erased = tracker.delete_user(gone, now=NOW)
    assert erased.experiments[0].days_marked
    cutoff = NOW - (T0 + timedelta(days=2))  # past the first days
    with pytest.raises(ExpiredLogs, match="run `tracker rollup` first"):
        tracker.expire_logs(cutoff, now=NOW)
    assert count(tracker.engine, "log_expiry") == 0  # nothing recorded, nothing deleted
    tracker.rollup(now=NOW)
    incremental = dump(tracker.engine)
    tracker.rollup(full=True, now=NOW)
    assert dump(tracker.engine) == incremental
    assert tracker.expire_logs(cutoff, now=NOW).impressions > 0


def _by_arm(tracker, key: str, table: str, since: date, cumulative: bool) -> list[tuple]:
    """``table``'s rows of ``key`` (its arms by name) from ``since`` on, of one view."""
    with tracker.engine.connect() as conn:
        rows = conn.execute(sa.text(
            f"SELECT a.key AS arm, t.* FROM {table} t JOIN arm a ON a.id = t.arm_id "
            "JOIN experiment e ON e.id = t.experiment_id WHERE e.key = :key "
            "AND t.day >= :since AND t.cumulative = :cumulative"),
            {"key": key, "since": since, "cumulative": cumulative}).mappings().all()
    return sorted(tuple((k, v) for k, v in sorted(r.items())
                        if k not in ("experiment_id", "arm_id", "computed_at", "id"))
                  for r in rows)


def _stored_users(tracker, key: str, prefix: str = "") -> dict[str, set]:
    """Each per-user state table's users of ``key`` (``prefix`` taken off), with their
    stored bytes where the table is keyed by user (a checkpoint row's records, unpacked,
    with their cell, an arm id, as the arm's key)."""
    with tracker.engine.connect() as conn:
        experiment = conn.execute(sa.text("SELECT id FROM experiment WHERE key = :key"),
                                  {"key": key}).scalar()
        arms = dict(conn.execute(sa.text("SELECT id, key FROM arm WHERE experiment_id = :id"),
                                 {"id": experiment}).all())
        columns = conn.execute(sa.text("SELECT columns FROM rollup_checkpoint WHERE "
                                       "experiment_id = :id"), {"id": experiment}).scalar()
        size = 16 + 16 * len(json.loads(columns)["columns"])  # cell, impressions, 2 x float

        def cell(code: int) -> str:  # an arm, or its crossover cell (tracker.rollup.cells)
            arm = arms[int(assignment_of(np.array([code]))[0])]
            return f"{arm} (crossover)" if is_crossed(np.array([code]))[0] else arm

        def named(data: bytes) -> tuple:
            return tuple((cell(int.from_bytes(data[at:at + 8], "little")),
                          data[at + 8:at + size]) for at in range(0, len(data), size))

        found = {table: {(u.removeprefix(prefix),
                          named(unpack(bytes(d))) if table == "rollup_user_totals"
                          else bytes(d))
                         for u, d in conn.execute(sa.text(
                             f"SELECT user_id, data FROM {table} WHERE experiment_id = :id"),
                             {"id": experiment})} for table in KEYED}
        seen = set()
        for (data,) in conn.execute(sa.text(
                "SELECT data FROM rollup_first_seen WHERE experiment_id = :id"),
                {"id": experiment}):
            column = pa.ipc.open_stream(pa.py_buffer(bytes(data))).read_all()["user_id"]
            seen |= {str(v).removeprefix(prefix) for v in column.to_pylist()}
    return {**found, "rollup_first_seen": seen}


def _log_as(tracker, key: str, prefix: str, lists: list[dict], events: list[dict],
            batch: str = "") -> None:
    """``lists`` and ``events`` logged into ``key``, their users' ids prefixed and their
    ids made the key's and the ``batch``'s (two batches of the scenario share ids)."""
    def own(record: dict, field: str) -> dict:
        return {field: f"{key}-{batch}{record[field]}"} if field in record else {}

    for result in (
            tracker.log_impressions([dict(r, user_id=prefix + r["user_id"], experiment=key,
                                          **own(r, "impression_id")) for r in lists]),
            tracker.log_interactions([dict(e, user_id=prefix + e["user_id"],
                                           **own(e, "event_id"), **own(e, "impression_id"))
                                      for e in events])):
        assert not result.rejected and not result.conflicts  # every record stored


def _users_of(stored: dict[str, set]) -> set[str]:
    return {row if isinstance(row, str) else row[0] for rows in stored.values() for row in rows}


@pytest.mark.parametrize("late", [False, True], ids=["all-days-expired", "one-day-kept"])
def test_erasing_a_user_whose_days_expired_leaves_no_trace_and_later_days_without_them(
        tracker, late):
    # the user's totals stay in the cumulative checkpoint after their days' logs expired
    # (the next pass starts from it): an erasure takes them out of it, and of the first-seen
    # users, so the days after it are those of an experiment that never served the user.
    # ``twin`` is that experiment: the same logs (users prefixed), without the user.
    day = [T0.date() + timedelta(days=n) for n in range(7)]
    imps, events = make_logs(3, days=4, history=20)  # from noon on day 0 to noon on day 4
    solo = [{"impression_id": f"solo-{n}", "experiment": "home", "arm": "control",
             "user_id": "solo", "items": ["i1", "i2", "i3"], "served_at": at}
            for n, at in enumerate([T0 + timedelta(hours=1)] +
                                   ([T0 + timedelta(days=2, hours=1)] if late else []))]
    clicks = [{"event_id": f"solo-{r['impression_id']}", "user_id": "solo", "item_id": "i2",
               "event": "click", "occurred_at": r["served_at"] + timedelta(minutes=5)}
              for r in solo]
    for key, prefix, extra in (("home", "", (solo, clicks)), ("twin", "t-", ([], []))):
        create(tracker, key)
        _log_as(tracker, key, prefix, imps + extra[0], events + extra[1])
    # one-day-kept: the last day's windows are still open at the first rollup, so the
    # checkpoint is the day before, and that day's cumulative rows counted the user
    first = max(r["served_at"] for r in imps) + timedelta(minutes=1) if late else NOW
    tracker.rollup(now=first)
    tracker.expire_logs(NOW - (T0 + timedelta(days=1)), now=NOW)  # day 3 on recomputable
    assert "solo" in _users_of(_stored_users(tracker, "home"))
    tracker.delete_user("solo", now=NOW)
    assert "solo" not in _users_of(_stored_users(tracker, "home"))
    more, _ = make_logs(11, days=1, start=T0 + timedelta(days=5))  # users seen before too
    for key, prefix in (("home", ""), ("twin", "t-")):
        _log_as(tracker, key, prefix, more, [], batch="more-")
    tracker.rollup(now=NOW)
    assert "solo" not in _users_of(_stored_users(tracker, "home")) | \
        _blob_users(tracker.engine, "rollup_units")
    assert _stored_users(tracker, "home") == _stored_users(tracker, "twin", "t-")
    # the daily rows of the recomputable days, and the cumulative ones after the
    # checkpoint, bit for bit; not the set-level metrics of the cumulative view, which add
    # up the items served since the first day, an aggregate of lists whose logs expired
    # (the expired days' results stay, and hold no user's id)
    kept = day[3] if late else day[4]  # the checkpoint when the user was erased
    for table in ("rollup_metric", "rollup_health", "rollup_covariate_sums"):
        assert _by_arm(tracker, "home", table, day[2], False) == \
            _by_arm(tracker, "twin", table, day[2], False), table
        home, twin = (
            [row for row in _by_arm(tracker, key, table, kept + timedelta(days=1), True)
             if ("kind", "set") not in row] for key in ("home", "twin"))
        assert home and home == twin, table


def test_expiry_refuses_an_experiment_not_rolled_up_beside_one_that_is(tracker):
    # each experiment's impressions are checked against its own watermark, not another's:
    # 'late' was logged first (lower ids) and never rolled up, 'early' after it and rolled up
    _logged(tracker, "late", seed=5, users="late-")
    _logged(tracker, "early", seed=3)
    tracker.rollup("early", now=NOW)
    with pytest.raises(ExpiredLogs, match="'late'"):
        tracker.expire_logs(timedelta(days=1), now=NOW)
    assert count(tracker.engine, "log_expiry") == 0
    with tracker.engine.connect() as conn:
        assert conn.execute(sa.text(
            "SELECT count(*) FROM impression i JOIN experiment e ON e.id = i.experiment_id "
            "WHERE e.key = 'late'")).scalar() > 0


@pytest.mark.parametrize("case", ["final", "reopening", "erasure"])
def test_a_late_list_on_a_day_the_checkpoint_counted_after_expiry_reaches_the_later_days(
        tracker, case):
    # expired logs keep a pass from replaying the days before the checkpoint, so it starts
    # from the checkpoint; a day it counted that late lists change moves its users' totals
    # there by the change. final: on a final day before the checkpoint's; reopening: on the
    # checkpoint's own day, whose windows the late lists open again (the checkpoint cannot
    # move back); erasure: a user of the late lists' day erased before the rollup, whose
    # marks set that day aside too. ``twin`` had the late lists from the start (and never
    # served the erased user).
    day = [T0.date() + timedelta(days=n) for n in range(7)]
    imps, events = make_logs(3, days=4, history=20)  # from noon on day 0 to noon on day 4
    on = day[4] if case == "reopening" else day[3]
    late_at = datetime.combine(on, datetime.min.time(), tzinfo=UTC) + \
        timedelta(hours=23 if case == "reopening" else 9)
    late = [{"impression_id": f"late-{n}", "experiment": "home", "arm": arm, "user_id": user,
             "items": ["i1", "i2", "i3", "i4"], "served_at": late_at + timedelta(minutes=n)}
            for n, (user, arm) in enumerate([("u1", "treatment"), ("newbie", "control")])]
    clicks = [{"event_id": f"late-click-{n}", "user_id": r["user_id"], "item_id": "i2",
               "event": "click", "occurred_at": r["served_at"] + timedelta(minutes=5)}
              for n, r in enumerate(late)]
    gone = min({r["user_id"] for r in imps if r["served_at"].date() == on} - {"u1"}) \
        if case == "erasure" else None
    first = datetime.combine(day[5], datetime.min.time(), tzinfo=UTC) \
        if case == "reopening" else NOW  # day 4's windows closed, the late lists' not

    for key in ("home", "twin"):
        create(tracker, key)
    _log_as(tracker, "home", "", imps, events)
    _log_as(tracker, "twin", "t-", [r for r in imps if r["user_id"] != gone] + late,
            [e for e in events if e["user_id"] != gone] + clicks)
    tracker.rollup(now=first)
    tracker.expire_logs(first - (T0 + timedelta(days=1)), now=first)  # day 2 on recomputable
    _log_as(tracker, "home", "", late, clicks)  # on a day the checkpoint (day 4) counted
    if gone is not None:
        tracker.delete_user(gone, now=first)
    (summary,) = tracker.rollup("home", now=first + timedelta(hours=1))
    assert summary.days_recomputed == [on]
    more, _ = make_logs(11, days=1, start=T0 + timedelta(days=5))  # users seen before too
    for key, prefix in (("home", ""), ("twin", "t-")):
        _log_as(tracker, key, prefix, [r for r in more if r["user_id"] != gone], [], batch="more-")
    tracker.rollup(now=NOW)
    for table in ("rollup_metric", "rollup_health", "rollup_covariate_sums"):
        assert _by_arm(tracker, "home", table, day[2], False) == \
            _by_arm(tracker, "twin", table, day[2], False), table
        # the user-level cumulative rows after the checkpoint: the late lists' users moved
        # by their day's change (the totals less the old rows plus the new: floating-point,
        # so to the last bits), not the set-level ones (items served since the first day)
        home, twin = (
            [row for row in _by_arm(tracker, key, table, day[5], True)
             if ("kind", "set") not in row] for key in ("home", "twin"))
        assert home and [[(k, pytest.approx(v, rel=1e-12, abs=1e-12)
                           if isinstance(v, float) else v) for k, v in row] for row in home] \
            == [list(row) for row in twin], table
    with tracker.engine.connect() as conn:  # the day's old units, set aside, went
        assert not conn.execute(sa.text(
            "SELECT count(*) FROM rollup_units WHERE cumulative")).scalar()


def test_an_erasure_keeps_a_popularity_whose_reference_period_expired_in_part(tracker):
    # the stored popularity is never counted again from partial logs: an erasure of a user
    # with interactions in the part of its period that is left does not drop it
    imps, events = _logged(tracker, days=3)
    tracker.rollup(now=NOW)
    cutoff = datetime.combine(T0.date() - timedelta(days=2), datetime.min.time(), tzinfo=UTC)
    first = datetime.combine(T0.date(), datetime.min.time(), tzinfo=UTC)
    assert any(e["occurred_at"] < cutoff for e in events)  # some of the history expires
    user = next(e["user_id"] for e in events if cutoff <= e["occurred_at"] < first and
                any(r["user_id"] == e["user_id"] for r in imps))
    tracker.expire_logs(NOW - cutoff, now=NOW)
    before = dump(tracker.engine)["rollup_popularity"]
    tracker.delete_user(user, now=NOW)
    tracker.rollup(now=NOW)
    assert dump(tracker.engine)["rollup_popularity"] == before
