"""Migration 0006 (the rollup state's generation): upgrade keeps the watermarks, downgrade
turns a reset state back into what it meant before (no row: rebuild) and keeps the rest.
Migration 0008 (self-describing stored state): both directions invalidate the stored state
and the watermarks, keep the results the report reads, and the next run rebuilds the same
results."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pyarrow as pa
import sqlalchemy as sa

from tests.helpers import insert_plain_experiment
from tests.rollup.scenario import CUTOFFS, assert_same_tables, create, dump, make_logs
from tests.rollup.test_rollup import NOW
from tracker import Tracker
from tracker.rollup import state
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.outcomes import Layout
from tracker.store import computed, schema
from tracker.store.db import create_engine
from tracker.store.rollup_tables import CROSSOVER


def _states(engine: sa.Engine) -> list[tuple]:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT experiment_id, impressions_seen, interactions_seen FROM rollup_state "
            "ORDER BY experiment_id")).all()


def test_0006_keeps_watermarks_both_ways_and_a_reset_downgrades_to_no_row(empty_url):
    engine = create_engine(empty_url)
    schema.upgrade(engine, "0005")
    with engine.begin() as conn:  # plain SQL at 0005: the code expects the later schema
        insert_plain_experiment(conn, 1000)
        conn.execute(sa.text("INSERT INTO rollup_state (experiment_id, impressions_seen, "
                             "interactions_seen, updated_at) VALUES (1000, 7, 9, 0)"))
    schema.upgrade(engine, "0007")
    assert _states(engine) == [(1000, 7, 9)]
    schema.downgrade(engine, "0005")
    assert _states(engine) == [(1000, 7, 9)]
    schema.upgrade(engine)  # 0008 invalidates the watermarks: (1000, None, None)
    with Tracker(empty_url) as t:
        create(t, key="declared")
        t.declare_catalog("declared", ["i1"])  # a reset row: watermarks NULL, generation 1
        declared = t.experiment("declared").id
        with t.engine.connect() as conn:
            generations = dict(conn.execute(sa.text(
                "SELECT experiment_id, generation FROM rollup_state")).all())
    assert sorted(_states(engine)) == sorted([(1000, None, None), (declared, None, None)])
    assert generations == {1000: 0, declared: 1}
    schema.downgrade(engine, "0005")
    assert _states(engine) == []  # reset rows: no row, a rebuild, as before 0006
    engine.dispose()


STATE = ("rollup_units", "rollup_pairs", "rollup_popularity", "rollup_exposure")
HEAD_STATE = ("rollup_units", "rollup_popularity", "rollup_exposure")  # 0018: no pairs
LATER = ("rollup_first_seen", "rollup_exposure_day")  # created by 0012: absent at 0007


def _state_rows(engine: sa.Engine) -> dict[str, int]:
    """Rows per state table the schema has (``rollup_pairs`` only before 0018)."""
    with engine.connect() as conn:
        present = set(sa.inspect(conn).get_table_names())
        return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one()
                for t in STATE if t in present}


def _rolled_up(url: str) -> dict:
    with Tracker(url) as t:
        t.rollup("home", now=NOW)
    return _results(url)


def _results(url: str) -> dict:
    engine = create_engine(url)
    # tables created after 0007 (CUPED's 0011, the exposure-day 0012) do not exist there:
    # compared where they do (tests/rollup)
    # and 0025's slice keys (every row '' there: a whole arm's) and slice counts
    out = dump(engine, without=STATE + LATER + ("rollup_user_covariates", "rollup_covariate_sums",
                                                "rollup_slice_count"))
    engine.dispose()
    return {table: [tuple(kv for kv in row if kv[0] not in ("segment", "slice"))
                    for row in rows if not dict(row).get("segment")]
            for table, rows in out.items()}


def test_0008_invalidates_state_both_ways_keeps_results_and_the_next_run_rebuilds_them(
        empty_url):
    engine = create_engine(empty_url)
    schema.upgrade(engine)
    with Tracker(empty_url) as t:
        create(t)
        imps, events = make_logs(5)
        t.log_impressions(imps, on_invalid="all_or_nothing")
        t.log_interactions(events, on_invalid="all_or_nothing")
    expected = _rolled_up(empty_url)
    assert all(_state_rows(engine).values())
    schema.downgrade(engine, "0007")
    assert _state_rows(engine) == dict.fromkeys(STATE, 0)
    assert [w for _, *w in _states(engine)] == [[None, None]]  # the next run rebuilds
    assert _results(empty_url) == expected  # what the report reads stays
    schema.upgrade(engine)
    assert _state_rows(engine) == dict.fromkeys(HEAD_STATE, 0)
    assert _results(empty_url) == expected
    # rebuilt in the new format, the same results (up to the last bits of float sums: on
    # PostgreSQL the index 0013 re-creates refreshes the table's statistics, and the reads'
    # row order, hence the order of summation, can follow another plan)
    assert_same_tables(_rolled_up(empty_url), expected)
    assert all(_state_rows(engine).values())
    engine.dispose()


def test_0008_upgrade_drops_state_written_in_the_old_format(empty_url):
    engine = create_engine(empty_url)
    schema.upgrade(engine, "0007")
    with engine.begin() as conn:  # plain SQL at 0007: one row of each old format
        insert_plain_experiment(conn, 1000)
        conn.execute(sa.text("INSERT INTO rollup_state (experiment_id, impressions_seen, "
                             "interactions_seen, updated_at) VALUES (1000, 7, 9, 0)"))
        blob = {"b": b"\x00" * 8}
        conn.execute(sa.text("INSERT INTO rollup_units VALUES (1000, '2026-01-01', false, 0, "
                             "'[\"u\"]', :b, :b, :b, :b)"), blob)
        conn.execute(sa.text("INSERT INTO rollup_pairs VALUES (1000, '2026-01-01', '[]', '[]', "
                             ":b)"), blob)
        conn.execute(sa.text("INSERT INTO rollup_popularity VALUES (1000, '2026-01-01', 7, "
                             "'[]', :b, 0)"), blob)
        conn.execute(sa.text("INSERT INTO rollup_exposure VALUES (1000, '2026-01-01', false, 0, "
                             "'[]', :b)"), blob)
    assert _state_rows(engine) == dict.fromkeys(STATE, 1)
    schema.upgrade(engine)
    assert _state_rows(engine) == dict.fromkeys(HEAD_STATE, 0)
    assert _states(engine) == [(1000, None, None)]
    engine.dispose()


def test_0009_drops_the_popularity_state_of_every_interaction_and_resets_watermarks(
        empty_url):
    engine = create_engine(empty_url)
    schema.upgrade(engine, "0008")
    with engine.begin() as conn:  # plain SQL at 0008: the code expects the later schema
        insert_plain_experiment(conn, 1000)
        conn.execute(sa.text("INSERT INTO rollup_state (experiment_id, impressions_seen, "
                             "interactions_seen, updated_at) VALUES (1000, 7, 9, 0)"))
        for table, key in (("rollup_pairs", "'2026-01-01'"),
                           ("rollup_popularity", "'2026-01-02', 28"),
                           ("rollup_units", "'2026-01-01', false, 0"),
                           ("rollup_exposure", "'2026-01-01', false, 0")):
            conn.execute(sa.text(f"INSERT INTO {table} VALUES (1000, {key}, :b)"),
                         {"b": b"stored at 0008"})
    schema.upgrade(engine, "0017")
    assert _state_rows(engine) == {"rollup_units": 1, "rollup_pairs": 0,
                                   "rollup_popularity": 0, "rollup_exposure": 1}
    assert _states(engine) == [(1000, None, None)]  # the next run recomputes every day
    schema.downgrade(engine, "0008")
    assert _states(engine) == [(1000, None, None)]
    engine.dispose()


def test_0018_drops_the_pairs_and_the_next_run_recomputes_every_day_with_the_new_rule(
        empty_url):
    engine = create_engine(empty_url)
    schema.upgrade(engine)
    with Tracker(empty_url) as t:
        create(t)
        imps, events = make_logs(8, history=30)
        t.log_impressions(imps, on_invalid="all_or_nothing")
        t.log_interactions(events, on_invalid="all_or_nothing")
        t.rollup("home", now=NOW)
    expected = dump(engine)
    schema.downgrade(engine, "0017")
    assert _state_rows(engine)["rollup_pairs"] == 0 and \
        _state_rows(engine)["rollup_popularity"] == 0
    assert [w for _, *w in _states(engine)] == [[None, None]]  # that code rebuilds
    with engine.begin() as conn:  # as a rollup of 0017 leaves them
        conn.execute(sa.text("UPDATE rollup_state SET impressions_seen = 1000000, "
                             "interactions_seen = 1000000"))
        conn.execute(sa.text("INSERT INTO rollup_pairs VALUES (1, '2026-01-01', :b)"),
                     {"b": b"pairs/2"})
        conn.execute(sa.text("INSERT INTO rollup_popularity VALUES (1, '2026-01-02', 28, "
                             ":b)"), {"b": b"popularity/2"})
    schema.upgrade(engine)
    assert "rollup_pairs" not in sa.inspect(engine).get_table_names()
    assert _state_rows(engine)["rollup_popularity"] == 0
    assert [w for _, *w in _states(engine)] == [[1000000, 1000000]]  # no rebuild asked
    with Tracker(empty_url) as t:
        (summary,) = t.rollup("home", now=NOW)  # no popularity: counted, every day again
    assert summary.days_recomputed == sorted({r["served_at"].date() for r in imps})
    assert_same_tables(dump(engine), expected)
    engine.dispose()


def _streams(engine: sa.Engine) -> dict[tuple, pa.Table]:
    """The ``covsums/2`` streams of revision 0018, decoded, per (experiment, day, view)."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT experiment_id, day, cumulative, data "
                                    "FROM rollup_covariate_sums")).all()
    return {(e, str(d), bool(c)): state.read(data, "covsums/2") for e, d, c, data in rows}


def test_0019_turns_the_covariate_sum_streams_into_rows_and_back_bit_for_bit(empty_url):
    engine = create_engine(empty_url)
    schema.upgrade(engine)
    with Tracker(empty_url) as t:
        create(t, cuped_days=7)
        imps, events = make_logs(8, history=30)
        t.log_impressions(imps, on_invalid="all_or_nothing")
        t.log_interactions(events, on_invalid="all_or_nothing")
        t.rollup("home", now=NOW)
        frames = {c: computed.covariate_table(t.engine, "home", c) for c in (False, True)}
    # the unit streams come back in the /1 form 0020's downgrade writes: read, not compared
    expected, units = dump(engine, without=("rollup_units",)), _decoded_units(engine)
    assert len(frames[True]) > 0 and frames[True]["x:pre_interactions"].abs().sum() > 0
    schema.downgrade(engine, "0018")
    streams = _streams(engine)
    assert {(day, c) for _, day, c in streams} == \
        {(str(day), c) for c in (False, True) for day in frames[c]["day"].unique()}
    for (_, day, cumulative), table in streams.items():
        assert state.metadata(table, "covariates").split(",") == list(frames[True].attrs[
            "covariates"])
        frame = frames[cumulative]
        mine = frame[frame["day"].astype(str) == day]
        assert table.num_rows == len(mine)
        for name in [c for c in frame.columns if ":" in c]:  # every sum, bit for bit
            assert sorted(table[name].to_pylist()) == sorted(mine[name].tolist()), name
    with engine.begin() as conn:  # as 0018's writer wrote them, and one of another format
        for (experiment, day, cumulative), table in streams.items():
            conn.execute(sa.text(
                "UPDATE rollup_covariate_sums SET data = :d WHERE experiment_id = :e "
                "AND day = :day AND cumulative = :c"),
                {"d": bytes(state.write(table, "covsums/2", covariates=state.metadata(
                    table, "covariates"), cuped_days="7")), "e": experiment,
                 "day": date.fromisoformat(day), "c": cumulative})
        conn.execute(sa.text("INSERT INTO rollup_covariate_sums VALUES (:e, :d, false, :b)"),
                     {"e": experiment, "d": date(2020, 1, 1), "b": b"covsums/1"})
    schema.upgrade(engine)
    # 0027 went down and up too: its crossover rows and checkpoint sums, computed again by
    # the next rollup (the cumulative view from the first day, once)
    with Tracker(empty_url) as t:
        t.rollup("home", now=NOW)
    assert_same_tables(dump(engine, without=("rollup_units",)), expected, rel=0.0)
    again = _decoded_units(engine)
    assert again.keys() == units.keys()
    for key, totals in units.items():
        assert again[key].users.equals(totals.users), key
        for name in ("cells", "impressions", "sums", "counts"):
            np.testing.assert_array_equal(getattr(again[key], name), getattr(totals, name))
    engine.dispose()


def _decoded_units(engine: sa.Engine) -> dict:
    """Every stored unit totals, decoded, by (experiment, day, view)."""
    layout = Layout.for_cutoffs(list(CUTOFFS))
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT experiment_id, day, cumulative, data FROM "
                                    "rollup_units ORDER BY experiment_id, day, cumulative, "
                                    "part")).all()
    parts: dict = {}
    for experiment, day, cumulative, data in rows:
        parts.setdefault((experiment, str(day), bool(cumulative)), []).append(bytes(data))
    return {key: UnitTotals.decode(found, layout) for key, found in parts.items()}


def _stored_streams(engine: sa.Engine) -> dict[tuple, tuple[str, pa.Table]]:
    """Every stored unit and provisional-lists stream, decoded, with its format (the
    provisional ones only at a revision that has their table: 0022 and before)."""
    out = {}
    keys = {"rollup_units": "experiment_id, day, cumulative, part",
            "rollup_provisional": "experiment_id, day, part"}
    with engine.connect() as conn:
        for table, columns in keys.items():
            if not sa.inspect(conn).has_table(table):
                continue
            for *key, data in conn.execute(sa.text(f"SELECT {columns}, data FROM {table}")):
                data = bytes(data)
                fmt = state.format_of(data)
                if fmt and fmt.startswith(("units/", "provisional-lists/")):
                    out[(table, *(str(k) for k in key))] = (
                        fmt, pa.ipc.open_stream(pa.py_buffer(data)).read_all())
    return out


def test_0020_names_the_default_engines_results_and_a_spark_one_rebuilds_after_downgrade(
        empty_url):
    """Upgrade: rows with watermarks are the default engine's (``database``), reset ones stay
    unknown. Downgrade: an experiment another source holds keeps no watermarks, so the
    release before rebuilds it from the database as it would have; the stored units go back
    to the format that release reads, every value kept, and this release reads them on
    after the next upgrade."""
    engine = create_engine(empty_url)
    schema.upgrade(engine)
    with Tracker(empty_url) as t:
        for key, seed in (("home", 3), ("other", 4)):
            create(t, key)
            imps, events = make_logs(seed, key=key)
            t.log_impressions(imps, on_invalid="all_or_nothing")
            t.log_interactions(events, on_invalid="all_or_nothing")
        t.rollup("home", now=NOW)
        provisional_now = max(r["served_at"] for r in imps) + timedelta(hours=1)
        t.rollup("other", now=provisional_now)  # its last day provisional
    watermarks = {e: w for e, *w in _states(engine)}
    written = _stored_streams(engine)
    assert {fmt for fmt, _ in written.values()} == {"units/2"}
    with engine.connect() as conn:  # 0021's downgrade writes them back as cumulative units
        checkpoints = {(str(e), str(d)) for e, d in conn.execute(sa.text(
            "SELECT experiment_id, day FROM rollup_checkpoint"))}
    assert checkpoints
    with engine.begin() as conn:  # "other" taken over by Spark, which keeps no watermarks
        conn.execute(sa.text("UPDATE rollup_state SET source = 'spark:/s', "
                             "impressions_seen = NULL, interactions_seen = NULL "
                             "WHERE experiment_id = 2"))
    schema.downgrade(engine, "0019")
    assert "source" not in {c["name"] for c in sa.inspect(engine).get_columns("rollup_state")}
    assert {e: w for e, *w in _states(engine)} == {1: watermarks[1], 2: [None, None]}
    before = _stored_streams(engine)
    assert before.keys() >= written.keys()
    assert {(k[1], k[2]) for k in before.keys() - written.keys()} == checkpoints
    assert all(k[0] == "rollup_units" and k[3] in ("1", "True") for k in
               before.keys() - written.keys())
    for key, (fmt, table) in written.items():
        old_fmt, old = before[key]
        assert old_fmt == fmt.replace("/2", "/1") and "cell" not in old.column_names
        assert old.rename_columns(["cell" if n == "arm_id" else n for n in old.column_names]) \
            .replace_schema_metadata(table.schema.metadata).equals(table), key
    with engine.begin() as conn:  # "other" reset as a Spark run of 0019 leaves it
        conn.execute(sa.text("UPDATE rollup_state SET impressions_seen = NULL, "
                             "interactions_seen = NULL WHERE experiment_id = 2"))
    schema.upgrade(engine)
    with engine.connect() as conn:
        found = conn.execute(sa.text("SELECT experiment_id, source FROM rollup_state "
                                     "ORDER BY experiment_id")).all()
    assert found == [(1, "database"), (2, None)]
    expected = dump(engine, without=("rollup_units",))
    with Tracker(empty_url) as t:  # the /1 streams read on: nothing new, nothing moves
        (summary,) = t.rollup("home", now=NOW)
    assert summary.days_recomputed == [] and summary.taken_over is None
    # but the crossover rows 0027's downgrade took: its upgrade had the cumulative view
    # computed again, once
    found = dump(engine, without=("rollup_units",))
    assert _crossover_rows(found) and not _crossover_rows(expected)
    assert_same_tables(_without_crossover(found), expected, rel=0)
    engine.dispose()


def _crossover_rows(found: dict) -> list:
    return [row for rows in found.values() for row in rows
            if dict(row).get("segment") == CROSSOVER]


def _without_crossover(found: dict) -> dict:
    return {t: [row for row in rows if dict(row).get("segment") != CROSSOVER]
            for t, rows in found.items()}


def test_0021_downgrade_drops_units_set_aside_for_a_cumulative_pass_that_never_came(
        empty_url):
    """A run stopped before its last transaction leaves the units the checkpoint counted of
    a day it recomputed set aside (``cumulative`` true): the release before 0021 would read
    them as its checkpoint, which the downgrade writes there, on the checkpoint's day."""
    engine = create_engine(empty_url)
    schema.upgrade(engine)
    with Tracker(empty_url) as t:
        create(t)
        imps, events = make_logs(3)
        t.log_impressions(imps, on_invalid="all_or_nothing")
        t.log_interactions(events, on_invalid="all_or_nothing")
        t.rollup("home", now=NOW)
    with engine.begin() as conn:
        (day,) = conn.execute(sa.text("SELECT day FROM rollup_checkpoint")).one()
        conn.execute(sa.text(  # as results.delete_day_state sets the day's units aside
            "UPDATE rollup_units SET cumulative = :t WHERE day = :d"), {"t": True, "d": day})
    schema.downgrade(engine, "0020")
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT day, cumulative FROM rollup_units "
                                    "WHERE cumulative = :t"), {"t": True}).all()
    assert {(str(d), bool(c)) for d, c in rows} == {(str(day), True)}
    cumulative = [table for key, (_, table) in _stored_streams(engine).items()
                  if key[3] in ("1", "True")]
    # the checkpoint's: every user through its day, not the day's own set aside
    assert {u for t in cumulative for u in t["user_id"].to_pylist()} == \
        {r["user_id"] for r in imps} != {r["user_id"] for r in imps
                                         if r["served_at"].date() == day}
    engine.dispose()


def test_0022_drops_the_rows_of_days_an_erasure_marked_and_the_next_run_reads_them_again(
        empty_url):
    """A day the release before marked for recompute (an erasure: ``computed_at`` one
    microsecond before ``closes_at``) still holds its per-user rows, erased user included;
    this release would publish a day final since from them. Upgrade drops the daily rows of
    the marked days only (the erased user's days), and the next run
    recomputes them from the logs: the tables of one full rollup without the erased user."""
    engine = create_engine(empty_url)
    schema.upgrade(engine)
    with Tracker(empty_url) as t:
        create(t)
        imps, events = make_logs(5, users=30)
        t.log_impressions(imps, on_invalid="all_or_nothing")
        t.log_interactions(events, on_invalid="all_or_nothing")
        provisional_now = max(r["served_at"] for r in imps) + timedelta(hours=1)
        t.rollup("home", now=provisional_now)  # the last day provisional
    last = max(r["served_at"] for r in imps).date()
    days_of: dict[str, set] = {}
    for r in imps:
        days_of.setdefault(r["user_id"], set()).add(r["served_at"].date())
    gone = min((u for u in days_of if last in days_of[u]), key=lambda u: len(days_of[u]))
    marked = days_of[gone]  # the days the erasure marks: their lists'
    schema.downgrade(engine, "0021")
    with engine.begin() as conn:  # the release before's erasure: rows deleted, day marked
        for table in ("impression", "interaction", "rollup_user_covariates"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE user_id = :u"), {"u": gone})
        for day in marked:
            conn.execute(sa.text("UPDATE rollup_day SET closes_at = computed_at, "
                                 "computed_at = computed_at - 1 WHERE day = :d"), {"d": day})
    per_day = "SELECT DISTINCT day FROM {} WHERE {}"
    with engine.connect() as conn:
        before = {t: {str(d) for (d,) in conn.execute(sa.text(per_day.format(t, w)))}
                  for t, w in (("rollup_units", "cumulative = false"),
                               ("rollup_exposure", "cumulative = false"))}
    assert before["rollup_units"] - {str(d) for d in marked}
    schema.upgrade(engine)
    with engine.connect() as conn:
        after = {t: {str(d) for (d,) in conn.execute(sa.text(per_day.format(t, w)))}
                 for t, w in (("rollup_units", "cumulative = false"),
                              ("rollup_exposure", "cumulative = false"))}
    assert after == {t: days - {str(d) for d in marked} for t, days in before.items()}
    with Tracker(empty_url) as t:
        (summary,) = t.rollup("home", now=provisional_now)
        assert marked <= set(summary.days_recomputed) and summary.impressions_read > 0
        incremental = dump(engine)
        t.rollup("home", full=True, now=provisional_now)
    assert_same_tables(dump(engine), incremental, rel=0)
    engine.dispose()
