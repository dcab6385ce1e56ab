"""A provisional day keeps its encoded impressions and ground truth: new interactions that
answer it are scored from that state (no impression read again), only for the users they
change, and end in the tables of one full rollup; the state goes when the day is final."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from itertools import zip_longest

import numpy as np
import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import fresh_database, migrated
from tests.helpers import T0
from tests.rollup.scenario import WINDOW, assert_same_tables, create, dump, make_logs
from tests.rollup.test_rollup import _batches, _check_against_reference
from tracker import Tracker
from tracker.errors import StaleState
from tracker.rollup import engine, provisional, state
from tracker.rollup.columnar import PAIR_LIMIT, EncodedLists
from tracker.rollup.popularity import Popularity
from tracker.rollup.provisional import ProvisionalDay
from tracker.rollup.truth import Truth
from tracker.store import results

EARLY = T0  # before every impression: every day stays provisional


def _kept_days(engine: sa.Engine) -> list:
    with engine.connect() as conn:
        return sorted({str(day) for (day,) in conn.execute(sa.text(
            "SELECT day FROM rollup_provisional"))})


def _late_click(imps):
    """An interaction of the last day's first user, answering that user's impressions."""
    last_day = max(r["served_at"] for r in imps).date()
    on_last = sorted((r for r in imps if r["served_at"].date() == last_day),
                     key=lambda r: r["served_at"])
    imp = on_last[-1]
    late = {"event_id": "late", "user_id": imp["user_id"], "item_id": "never-served",
            "event": "purchase", "occurred_at": imp["served_at"] + timedelta(minutes=1)}
    return last_day, on_last, late


def test_a_late_click_on_a_provisional_day_reads_no_impression_again(tracker):
    create(tracker)
    imps, events = make_logs(seed=41, days=3, users=8, impressions=60)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    assert _kept_days(tracker.engine) == sorted({str(r["served_at"].date()) for r in imps})
    last_day, _, late = _late_click(imps)
    tracker.log_interactions([late])
    (summary,) = tracker.rollup("home", now=EARLY)
    assert summary.days_recomputed == [last_day]
    assert summary.impressions_read == 0  # scored from the stored state
    assert (summary.days_in_part, summary.users_recomputed) == (1, 1)
    _check_against_reference(tracker, imps, events + [late])
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=EARLY)
    assert dump(tracker.engine) == incremental


def test_a_day_final_since_is_published_from_its_stored_rows_and_its_state_dropped(
        tracker):
    """Windows closed since the days were computed, nothing new: the days are final as
    they stand, published from their stored rows without reading a log, and they equal
    one full rollup."""
    create(tracker)
    imps, events = make_logs(seed=42, days=2, users=6, impressions=30)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    assert _kept_days(tracker.engine)
    later = max(r["served_at"] for r in imps) + timedelta(days=2)
    (summary,) = tracker.rollup("home", now=later)  # every window closed
    days = sorted({r["served_at"].date() for r in imps})
    assert summary.days_recomputed == days
    assert summary.days_final_as_stored == len(days)
    assert (summary.impressions_read, summary.truth_pairs_read) == (0, 0)  # no log read
    assert _kept_days(tracker.engine) == []
    assert not tracker.metric_table("home")["provisional"].any()
    _check_against_reference(tracker, imps, events)
    final = dump(tracker.engine)
    tracker.rollup("home", full=True, now=later)
    assert dump(tracker.engine) == final


def test_a_day_final_under_the_grace_it_was_computed_with_stays_provisional_under_a_longer(
        tracker, settings):
    """The grace raised after a day was computed: at a clock past its old closing but
    before its new one, the day is published from its stored rows still provisional, keeps
    its state, and equals one full rollup with the new grace."""
    create(tracker)
    imps, events = make_logs(seed=42, days=1, users=6, impressions=30)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    closes = max(r["served_at"] for r in imps) + WINDOW + timedelta(hours=1)  # grace: 1 h
    now = closes + timedelta(hours=2)  # a grace of 6 h closes it 3 hours later
    with Tracker(settings=replace(settings, rollup_grace_seconds=6 * 3600)) as longer:
        (summary,) = longer.rollup("home", now=now)
        days = {r["served_at"].date() for r in imps}
        assert summary.days_final_as_stored == len(days) and summary.impressions_read == 0
        table = longer.metric_table("home")
        last = max(days)  # its last list's windows close past ``now`` with the new grace
        assert table[table["day"] == last]["provisional"].all()
        assert not table[table["day"] != last]["provisional"].any()
        assert _kept_days(longer.engine) == [str(last)]
        incremental = dump(longer.engine)
        longer.rollup("home", full=True, now=now)
        assert dump(longer.engine) == incremental


def test_a_late_click_on_a_day_final_since_is_scored_from_its_state_and_the_state_dropped(
        tracker):
    """A day whose windows closed since its state was kept, answered by a late click: its
    changed user is scored from the state a last time, the state is not kept, and the day
    equals one full rollup's."""
    create(tracker)
    imps, events = make_logs(seed=43, days=2, users=6, impressions=30)
    last_day, _, late = _late_click(imps)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    tracker.log_interactions([late])
    later = max(r["served_at"] for r in imps) + timedelta(days=2)
    (summary,) = tracker.rollup("home", now=later)
    assert summary.impressions_read == 0  # the late day from its state, the others as stored
    assert (summary.days_in_part, summary.users_recomputed) == (1, 1)
    assert _kept_days(tracker.engine) == []
    _check_against_reference(tracker, imps, events + [late])
    final = dump(tracker.engine)
    tracker.rollup("home", full=True, now=later)
    assert dump(tracker.engine) == final


def test_no_row_commits_below_the_ids_a_run_takes_into_account(tracker):
    """What lets a day be final as it stands: the ids a run reads
    (:func:`~tracker.store.results.latest_ids`) have every row below them committed. A
    batch still being written when a later one commits (PostgreSQL hands out ids from a
    sequence, so the later batch's ids are higher) is waited for; on SQLite the later batch
    waits for the write lock instead. Either way, once both have committed, the rows at or
    below the ids read are exactly those the run saw."""
    create(tracker)
    first = {"event_id": "first", "user_id": "u", "item_id": "i", "event": "click",
             "occurred_at": T0}
    tracker.log_interactions([first])
    interaction = sa.Table("interaction", sa.MetaData(), autoload_with=tracker.engine)

    def row(key: str) -> dict:
        return {"event_key": key, "user_id": "u", "item_id": "i", "event_type": "click",
                "value": None, "impression_key": None}

    with tracker.engine.connect() as conn:  # the two columns as stored (epoch micros)
        stored = dict(conn.execute(sa.select(interaction)).mappings().one())
    micros = {c: stored[c] for c in ("occurred_at", "received_at")}
    slow_open, fast_done = threading.Event(), threading.Event()

    def slow() -> None:  # takes an id first, commits last
        with tracker.engine.begin() as conn:
            conn.execute(sa.insert(interaction).values(**(row("slow") | micros)))
            slow_open.set()
            fast_done.wait(5)
            time.sleep(0.5)

    def fast() -> None:  # a later batch, committed at once (SQLite: after the slow one)
        with tracker.engine.begin() as conn:
            conn.execute(sa.insert(interaction).values(**(row("fast") | micros)))
        fast_done.set()

    with ThreadPoolExecutor(max_workers=2) as pool:
        writing = pool.submit(slow)
        assert slow_open.wait(10)
        later = pool.submit(fast)
        if tracker.engine.dialect.name == "postgresql":
            later.result(10)  # committed while the slow batch is still open
        else:
            fast_done.set()  # SQLite: it waits for the slow one's write lock
        with tracker.engine.begin() as conn:
            top = results.latest_ids(conn)[1]
            seen = set(conn.execute(sa.select(interaction.c.event_key).where(
                interaction.c.id <= top)).scalars())
        writing.result(10)
        later.result(10)
    with tracker.engine.connect() as conn:
        below = set(conn.execute(sa.select(interaction.c.event_key).where(
            interaction.c.id <= top)).scalars())
    assert below == seen
    assert "first" in seen


def test_an_erasure_drops_a_provisional_days_stored_rows_and_the_day_is_read_again(tracker):
    """A user erased after a provisional rollup: the days their rows entered lose their
    stored per-user rows and kept state at once (they hold the user), and the next run
    recomputes them from the logs, as one full rollup does."""
    create(tracker)
    imps, events = make_logs(seed=47, days=2, users=6, impressions=30)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    gone = imps[0]["user_id"]
    erased = tracker.delete_user(gone, now=EARLY)
    (marked,) = [p.days_marked for p in erased.experiments]
    with tracker.engine.connect() as conn:
        for table in ("rollup_units", "rollup_provisional"):
            stored = {str(d) for (d,) in conn.execute(sa.text(
                f"SELECT DISTINCT day FROM {table} WHERE cumulative IS NOT TRUE"
                if table == "rollup_units" else f"SELECT DISTINCT day FROM {table}"))}
            assert not stored & {str(d) for d in marked}, table
    (summary,) = tracker.rollup("home", now=EARLY)
    assert set(marked) <= set(summary.days_recomputed)
    assert summary.impressions_read > 0  # read from the logs again
    _check_against_reference(tracker, [r for r in imps if r["user_id"] != gone],
                             [e for e in events if e["user_id"] != gone])
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=EARLY)
    assert dump(tracker.engine) == incremental


def test_a_row_given_the_id_of_one_erased_during_a_run_is_counted(tracker, monkeypatch):
    """An erasure deletes the newest interaction while a rollup runs, after the run read
    its ids: the run records its watermarks at most at the highest id left, so the next
    row logged (SQLite hands it the erased row's id) is new to the next run, and the day
    it answers, final as it stands afterwards, holds it as one full rollup does."""
    create(tracker)
    day_1, day_2 = T0, T0 + timedelta(days=1)

    def imp(key, arm, user, items, at):
        return {"impression_id": key, "experiment": "home", "arm": arm, "user_id": user,
                "items": items, "served_at": at}

    def event(key, user, item, kind, at):
        return {"event_id": key, "user_id": user, "item_id": item, "event": kind,
                "occurred_at": at}

    tracker.log_impressions([
        imp("a1", "control", "a", ["i1", "i2", "i3"], day_1),
        imp("u1", "treatment", "U", ["i1", "i2", "i3"], day_1 + timedelta(hours=1)),
        imp("v2", "control", "v", ["i1", "i2", "i3"], day_2),
        imp("w2", "treatment", "w", ["i4", "i5", "i6"], day_2 + timedelta(minutes=5))])
    tracker.log_interactions([event("e-a", "a", "i2", "click", day_1 + timedelta(minutes=9)),
                              event("e-w", "w", "i4", "click", day_2 + timedelta(minutes=9))])
    tracker.log_interactions([event("e-U", "U", "i1", "click", day_1 + timedelta(hours=1,
                                                                                minutes=5))])
    racing_now, later = day_2 + timedelta(hours=2), day_2 + timedelta(days=3)
    computing = engine._Run._compute_days
    erasing: list[threading.Thread] = []

    def erased_meanwhile(self, *args, **kwargs):  # the run has read its ids
        thread = threading.Thread(target=tracker.delete_user, args=("U",),
                                  kwargs={"now": racing_now})
        thread.start()  # deletes U's rows at once, then waits for the run's lock to mark
        erasing.append(thread)
        for _ in range(400):
            with tracker.engine.connect() as conn:
                if not conn.execute(sa.text(
                        "SELECT count(*) FROM interaction WHERE user_id = 'U'")).scalar():
                    break
            time.sleep(0.025)
        return computing(self, *args, **kwargs)

    monkeypatch.setattr(engine._Run, "_compute_days", erased_meanwhile)
    tracker.rollup("home", now=racing_now)
    monkeypatch.setattr(engine._Run, "_compute_days", computing)
    erasing[0].join(30)
    with tracker.engine.connect() as conn:
        marks, top = conn.execute(sa.text("SELECT interactions_seen FROM rollup_state")
                                  ).scalar(), conn.execute(sa.text(
                                      "SELECT max(id) FROM interaction")).scalar()
    assert marks <= top
    tracker.log_interactions([event("e-v", "v", "i1", "purchase",
                                    day_2 + timedelta(minutes=30))])
    tracker.rollup("home", now=racing_now)
    (summary,) = tracker.rollup("home", now=later)
    assert summary.days_final_as_stored >= 1
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=later)
    assert dump(tracker.engine) == incremental


def test_a_run_until_an_earlier_day_still_recomputes_the_days_an_erasure_marked(tracker):
    """An erasure deletes the stored rows of the days it marks; a run ``until`` an earlier
    day recomputes them too (the cumulative and exposure-day views after it read them), so
    its views are those of one full rollup without the user."""
    create(tracker)
    imps, events = make_logs(seed=7, days=3, users=10, impressions=60)
    days = sorted({r["served_at"].date() for r in imps})
    days_of: dict[str, set] = {}
    for r in imps:
        days_of.setdefault(r["user_id"], set()).add(r["served_at"].date())
    gone = next(u for u, d in sorted(days_of.items()) if days[0] in d and days[-1] in d)
    later = max(r["served_at"] for r in imps) + timedelta(days=3)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=later)
    tracker.delete_user(gone, now=later)
    (summary,) = tracker.rollup("home", until=days[0], now=later)
    assert days[-1] in summary.days_recomputed
    until = dump(tracker.engine)
    tracker.rollup("home", full=True, now=later)
    rebuilt = dump(tracker.engine)
    for table in ("rollup_metric", "rollup_health", "rollup_exposure_day"):
        assert until[table] == rebuilt[table], table


def test_a_late_row_given_an_erased_rows_id_counts_once_the_day_is_final(tracker):
    """The newest interaction erased after a provisional rollup: SQLite gives its id to the
    next row logged (a late purchase on the last day's top item), and the run counts that
    row (the erasure lowered the watermarks), as one full rollup does."""
    create(tracker)
    imps, events = make_logs(seed=47, days=2, users=6, impressions=30)
    _, on_last, late = _late_click(imps)
    late["item_id"] = on_last[-1]["items"][0]
    stranger = dict(late, event_id="stranger", user_id="stranger", item_id="zz")
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.log_interactions([stranger], on_invalid="all_or_nothing")  # the highest id
    tracker.rollup("home", now=EARLY)
    tracker.delete_user("stranger", now=EARLY)
    tracker.log_interactions([late], on_invalid="all_or_nothing")
    later = max(r["served_at"] for r in imps) + timedelta(days=2)
    tracker.rollup("home", now=later)
    _check_against_reference(tracker, imps, events + [late])
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=later)
    assert dump(tracker.engine) == incremental


def _parts(engine: sa.Engine) -> dict[tuple, bytes]:
    with engine.connect() as conn:
        return {(str(day), part): bytes(data) for day, part, data in conn.execute(sa.text(
            "SELECT day, part, data FROM rollup_provisional"))}


@pytest.mark.parametrize("share", [
    pytest.param(provisional.GAINED_SHARE, id="a-few-gained-pairs-add-one-part"),
    pytest.param(0.0, id="past-the-share-the-changed-chunks-truth-is-rewritten"),
])
def test_a_day_read_in_chunks_keeps_one_part_per_chunk_and_rewrites_the_changed_ones(
        settings, monkeypatch, share):
    """A day of several read chunks (1,000 impressions each): a late click of a user served
    once adds one part after the chunks' holding its pair (a few pairs gained), or changes
    the ground truth part of that impression's chunk only; nothing else changes (the item
    it adds was known: no items part either); the end equals one full rollup."""
    monkeypatch.setattr(provisional, "GAINED_SHARE", share)
    imps, events = make_logs(seed=47, days=1, users=300, impressions=2_500)
    solo = dict(imps[0], impression_id="home-imp-solo", user_id="solo")
    imps.insert(0, solo)
    late = {"event_id": "late", "user_id": "solo", "item_id": solo["items"][0],
            "event": "purchase", "occurred_at": solo["served_at"] + timedelta(minutes=1)}
    with Tracker(settings=settings.replace(rollup_chunk_cells=1)) as tracker:
        create(tracker)
        tracker.log_impressions(imps, on_invalid="all_or_nothing")
        tracker.log_interactions(events, on_invalid="all_or_nothing")
        tracker.rollup("home", now=EARLY)
        before = _parts(tracker.engine)
        day = str(solo["served_at"].date())
        parts = {part for d, part in before if d == day}
        assert parts == set(range(len(parts))) and len(parts) >= 2 + 2 * 2  # 2+ chunks
        tracker.log_interactions([late])
        (summary,) = tracker.rollup("home", now=EARLY)
        assert (summary.impressions_read, summary.users_recomputed) == (0, 1)
        after = _parts(tracker.engine)
        changed = {key for key in after if before.get(key) != after[key]}
        ((changed_day, part),) = changed  # the item was known: no items part
        assert changed_day == day and part >= 3
        if share:  # one more part, after the chunks'
            assert part == len(parts) and set(before) < set(after)
            assert state.format_of(after[changed_day, part]) == state.PROVISIONAL_GAINED
        else:  # one chunk's ground truth
            assert part % 2 == 1 and set(before) == set(after)
        incremental = dump(tracker.engine)
        tracker.rollup("home", full=True, now=EARLY)
        assert_same_tables(dump(tracker.engine), incremental)


def test_new_impressions_on_a_provisional_day_read_it_whole(tracker):
    create(tracker)
    imps, events = make_logs(seed=43, days=1, users=6, impressions=30)
    first, rest = imps[:20], imps[20:]
    tracker.log_impressions(first, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    tracker.log_impressions(rest, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    (summary,) = tracker.rollup("home", now=EARLY)
    assert summary.impressions_read == len(imps)
    _check_against_reference(tracker, imps, events)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), imp_cuts=st.lists(st.integers(0, 40), max_size=3),
       evt_cuts=st.lists(st.integers(0, 60), min_size=1, max_size=4),
       hours=st.integers(0, 4 * 24))
# a final day (one list, its window closed) turns provisional when later lists arrive for
# it: the cumulative checkpoint moves back to the day before
@example(seed=0, imp_cuts=[0, 9], evt_cuts=[0], hours=20)
def test_any_split_with_provisional_days_ends_in_the_tables_of_one_full_rollup(
        tmp_path, seed, imp_cuts, evt_cuts, hours):
    """Interactions arrive in batches while days are provisional (``now`` anywhere from
    before the first impression to after the last window): each rollup between them may
    score days from their stored state; the end equals one full rollup."""
    imps, events = make_logs(seed, days=3, users=8, impressions=40)
    imps.sort(key=lambda r: r["served_at"])
    events.sort(key=lambda r: r["occurred_at"])
    now = T0 + timedelta(hours=hours)
    with fresh_database(tmp_path) as url, Tracker(migrated(url)) as tracker:
        create(tracker)
        for imp_batch, evt_batch in zip_longest(_batches(imps, imp_cuts),
                                                _batches(events, evt_cuts), fillvalue=[]):
            tracker.log_impressions(imp_batch, on_invalid="all_or_nothing")
            tracker.log_interactions(evt_batch, on_invalid="all_or_nothing")
            tracker.rollup("home", now=now)
        incremental = dump(tracker.engine)
        tracker.rollup("home", full=True, now=now)
        assert_same_tables(dump(tracker.engine), incremental)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), evt_cuts=st.lists(st.integers(0, 60), min_size=1,
                                                     max_size=4),
       hours=st.integers(0, 2 * 24), step=st.integers(1, 36))
def test_days_turning_final_between_batches_end_in_the_tables_of_one_full_rollup(
        tmp_path, seed, evt_cuts, hours, step):
    """The clock moves ``step`` hours between rollups: days computed provisional turn final
    on the way (as they stand, or scored from their state a last time); the end equals one
    full rollup."""
    imps, events = make_logs(seed, days=3, users=8, impressions=40)
    events.sort(key=lambda r: r["occurred_at"])
    with fresh_database(tmp_path) as url, Tracker(migrated(url)) as tracker:
        create(tracker)
        tracker.log_impressions(imps, on_invalid="all_or_nothing")
        now = T0 + timedelta(hours=hours)
        for batch in _batches(events, evt_cuts):
            tracker.log_interactions(batch, on_invalid="all_or_nothing")
            tracker.rollup("home", now=now)
            now += timedelta(hours=step)
        tracker.rollup("home", now=now)
        incremental = dump(tracker.engine)
        tracker.rollup("home", full=True, now=now)
        assert_same_tables(dump(tracker.engine), incremental)


def _day() -> ProvisionalDay:
    """Two chunks: impressions 7 (u1) and 9 (u2), then 11 (u2)."""
    first = EncodedLists(np.array([7, 9]), np.array([0, 1]), np.array([1, 2]),
                         np.array([100, 200]), np.array([0, 1, 2, 1]), np.array([3, 1]),
                         np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([True, False]),
                         Truth(np.array([0, 0, 1]), np.array([0, 2, 1]),
                               np.array([1.0, 3.0, 2.0])))
    second = EncodedLists(np.array([11]), np.array([1]), np.array([2]), np.array([300]),
                          np.array([2, 0]), np.array([2]), np.array([[2.0, 2.0]]),
                          np.array([True]), Truth(np.array([0]), np.array([0]),
                                                  np.array([1.0])))
    popularity = Popularity(pa.array(["a", "c"]), np.array([2, 5]), 9)
    return ProvisionalDay.of([first, second], pa.array(["u1", "u2"]),
                             pa.array(["a", "b", "c"]), popularity)


def _stored(parts: provisional.Parts, over: dict[int, bytes] | None = None) -> list[bytes]:
    """The parts a table holds after ``parts`` are written over ``over``."""
    rows = {} if parts.whole or over is None else dict(over)
    if parts.drop_from is not None:
        rows = {part: data for part, data in rows.items() if part < parts.drop_from}
    rows.update({part: bytes(data) for part, data in parts.data.items()})
    return [rows[part] for part in sorted(rows)]


def test_the_stored_state_round_trips():
    day = _day()
    parts = day.encode([2, 5])
    assert parts.whole and sorted(parts.data) == [0, 1, 2, 3, 4, 5]  # users, items, 2 x 2
    back = ProvisionalDay.decode(_stored(parts), [2, 5])
    assert back.users.to_pylist() == ["u1", "u2"]
    assert back.items.to_pylist() == ["a", "b", "c"]
    assert back.ln_users.tolist() == pytest.approx([np.log(2), 0.0, np.log(5), 0.0])
    assert back.n_users == 9
    assert back.chunks.tolist() == [0, 0, 1]
    for name in ("ids", "users", "cells", "served_at", "items", "lengths", "overlap",
                 "has_baseline"):
        assert np.array_equal(getattr(back.lists, name), getattr(day.lists, name)), name
    assert back.lists.truth.rows.tolist() == [0, 0, 1, 2]
    assert back.lists.truth.items.tolist() == [0, 2, 1, 0]
    assert back.lists.truth.grades.tolist() == [1.0, 3.0, 2.0, 1.0]
    assert back.lists.users.dtype == back.lists.items.dtype == np.int32


def test_new_ground_truth_rewrites_only_the_truth_of_its_chunks(monkeypatch):
    monkeypatch.setattr(provisional, "GAINED_SHARE", 0.0)  # never a gained part
    day = _day()
    stored = {part: bytes(data) for part, data in day.encode([2, 5]).data.items()}
    back = ProvisionalDay.decode(_stored(provisional.Parts(stored, True)), [2, 5])
    # u1 clicks "a" within the window of impression 7 (chunk 0): already graded 1, now 3
    timed = pa.table({"user": ["u1"], "item": ["a"], "event": ["purchase"],
                      "at": pa.array([150], pa.int64())})
    keyed = pa.table({"impression": pa.array([], pa.int64()), "item": pa.array([], pa.string()),
                      "event": pa.array([], pa.string())})
    answered = back.answer(timed, keyed, {"purchase": 3.0}, window=100, limit=PAIR_LIMIT)
    assert answered.changed_users.tolist() == [0]
    parts = answered.day.encode([2, 5])
    assert not parts.whole and sorted(parts.data) == [3]  # chunk 0's truth only
    again = ProvisionalDay.decode(_stored(parts, stored), [2, 5])
    truth = again.lists.truth
    assert list(zip(truth.rows.tolist(), truth.items.tolist(), truth.grades.tolist(),
                    strict=True)) == [(0, 0, 3.0), (0, 2, 3.0), (1, 1, 2.0), (2, 0, 1.0)]
    # a new item: the items part too
    timed = pa.table({"user": ["u2"], "item": ["z"], "event": ["click"],
                      "at": pa.array([300], pa.int64())})
    grown = again.answer(timed, keyed, None, window=100, limit=PAIR_LIMIT).day.encode([2, 5])
    assert sorted(grown.data) == [1, 3, 5]  # items; u2's impressions 9 and 11: both chunks


_NOTHING_KEYED = pa.table({"impression": pa.array([], pa.int64()),
                           "item": pa.array([], pa.string()), "event": pa.array([], pa.string())})


def _answered(day: ProvisionalDay, user: str, item: str, at: int) -> ProvisionalDay:
    timed = pa.table({"user": [user], "item": [item], "event": ["purchase"],
                      "at": pa.array([at], pa.int64())})
    return day.answer(timed, _NOTHING_KEYED, {"purchase": 3.0}, window=100,
                      limit=PAIR_LIMIT).day


def _truth(day: ProvisionalDay) -> list[tuple]:
    truth = day.lists.truth
    return list(zip(truth.rows.tolist(), truth.items.tolist(), truth.grades.tolist(),
                    strict=True))


def test_a_few_gained_pairs_are_one_more_part_read_back_merged_until_they_are_many():
    stored = _stored(_day().encode([2, 5]))
    back = ProvisionalDay.decode(stored, [2, 5])
    rows = dict(enumerate(stored))
    raised = _answered(back, "u1", "a", 150)  # (7, a): grade 1 raised to 3, 1 pair of 4
    parts = raised.encode([2, 5])
    assert sorted(parts.data) == [6] and parts.drop_from is None  # after 2 chunks' parts
    assert state.format_of(parts.data[6]) == state.PROVISIONAL_GAINED
    again = ProvisionalDay.decode(_stored(parts, rows), [2, 5])
    assert _truth(again) == _truth(raised) != _truth(back)
    assert again.gained_parts == 1
    rows = dict(enumerate(_stored(parts, rows)))
    grown = _answered(again, "u2", "z", 350)  # a new item, on impression 11 only
    parts = grown.encode([2, 5])
    assert sorted(parts.data) == [1, 7]  # the items, and a second gained part
    third = ProvisionalDay.decode(_stored(parts, rows), [2, 5])
    assert _truth(third) == _truth(grown)
    assert third.items.to_pylist() == ["a", "b", "c", "z"] and third.gained_parts == 2
    rows = dict(enumerate(_stored(parts, rows)))
    many = _answered(third, "u1", "b", 150)  # 1 pair of 6 gained, but as many parts ...
    parts = replace(many, gained_parts=provisional.MAX_GAINED_PARTS).encode([2, 5])
    # ... held as allowed: every chunk's truth is written again and the gained dropped
    assert sorted(parts.data) == [3, 5] and parts.drop_from == 6
    last = _stored(parts, rows)
    assert len(last) == 6
    assert _truth(ProvisionalDay.decode(last, [2, 5])) == _truth(many)


def _gained_part(rows, items, lists=3) -> bytes:
    return bytes(state.write(pa.table({
        "row": pa.array(rows, pa.int32()), "item": pa.array(items, pa.int32()),
        "grade": pa.array([1.0] * len(rows), pa.float64())}),
        state.PROVISIONAL_GAINED, lists=str(lists)))


@pytest.mark.parametrize("part", [
    pytest.param(_gained_part([0], [1], lists=4), id="written-for-another-number-of-lists"),
    pytest.param(_gained_part([3], [0]), id="a-row-beyond-the-days-lists"),
    pytest.param(_gained_part([0], [3]), id="an-item-code-the-state-lacks"),
    pytest.param(_gained_part([1, 0], [0, 0]), id="pairs-out-of-order"),
])
def test_a_stale_gained_part_asks_for_a_full_rollup(part):
    parts = _stored(_day().encode([2, 5]))
    assert ProvisionalDay.decode(parts + [_gained_part([0], [1])], [2, 5]).gained_parts == 1
    with pytest.raises(StaleState, match="full"):
        ProvisionalDay.decode(parts + [part], [2, 5])


def test_a_chunk_missing_before_gained_parts_asks_for_a_full_rollup():
    parts = _stored(_day().encode([2, 5]))
    with pytest.raises(StaleState, match="full"):  # a gained part read as a chunk's
        ProvisionalDay.decode(parts[:-1] + [_gained_part([0], [1])], [2, 5])


@pytest.mark.parametrize("cutoffs, message", [
    pytest.param([2, 10], "overlap@10", id="a-cutoff-added-since-asks-for-a-full-rollup"),
])
def test_state_missing_a_column_asks_for_a_full_rollup(cutoffs, message):
    parts = _stored(_day().encode([2, 5]))
    with pytest.raises(StaleState, match=message):
        ProvisionalDay.decode(parts, cutoffs)


def test_another_format_version_asks_for_a_full_rollup():
    parts = _stored(_day().encode([2, 5]))
    table = state.read(parts[2], state.PROVISIONAL_LISTS)
    parts[2] = bytes(state.write(table, "provisional-lists/0"))
    with pytest.raises(StaleState, match="provisional-lists/2"):
        ProvisionalDay.decode(parts, [2, 5])


def test_a_state_missing_a_chunk_asks_for_a_full_rollup():
    parts = _stored(_day().encode([2, 5]))
    with pytest.raises(StaleState, match="2 chunks"):
        ProvisionalDay.decode(parts[:-2], [2, 5])


def test_a_state_in_the_one_stream_layout_is_not_read_and_its_day_read_whole(tracker):
    """A day kept as ``provisional/1`` (one stream of the whole day, part 0, and its items,
    part 1) is recomputed from the raw logs, which replaces (here: drops) the state."""
    create(tracker)
    imps, events = make_logs(seed=46, days=1, users=6, impressions=30)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    with tracker.engine.begin() as conn:
        days = [day for (day,) in conn.execute(sa.text(
            "SELECT DISTINCT day FROM rollup_provisional"))]
        conn.execute(sa.text("DELETE FROM rollup_provisional"))
        old = state.write(pa.table({"chunk": pa.array([0], pa.int32())}), "provisional/1",
                          n_users="3")
        items = state.write(pa.table({"item_id": ["a"], "ln_users": [0.0]}),
                            "provisional-items/1")
        for day in days:
            for part, data in enumerate((old, items)):
                conn.execute(sa.text("INSERT INTO rollup_provisional (experiment_id, day, "
                                     "part, data) VALUES (1, :day, :part, :data)"),
                             {"day": day, "part": part, "data": bytes(data)})
    last_day, on_last, late = _late_click(imps)
    tracker.log_interactions([late])
    (summary,) = tracker.rollup("home", now=EARLY)
    assert summary.days_recomputed == [last_day]
    assert summary.impressions_read > 0  # from the raw logs, not the old state
    _check_against_reference(tracker, imps, events + [late])
    with tracker.engine.connect() as conn:
        found = conn.execute(sa.text("SELECT data FROM rollup_provisional WHERE day = :day"),
                             {"day": last_day}).scalars().all()
    assert "provisional/1" not in {state.format_of(data) for data in found}  # replaced
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=EARLY)
    assert dump(tracker.engine) == incremental


def test_new_interactions_change_only_the_users_they_answer():
    day = _day()
    timed = pa.table({"user": ["u2", "u9"], "item": ["z", "a"], "event": ["click", "click"],
                      "at": pa.array([250, 150], pa.int64())})
    keyed = pa.table({"impression": pa.array([7], pa.int64()), "item": ["a"],
                      "event": ["click"]})
    answered = day.answer(timed, keyed, None, window=100, limit=PAIR_LIMIT)
    assert answered.changed_users.tolist() == [1]  # u2: z is new; a already graded on 7
    assert answered.new_items.to_pylist() == ["z"]
    assert answered.day.items.to_pylist() == ["a", "b", "c", "z"]
    truth = answered.day.lists.truth
    assert list(zip(truth.rows.tolist(), truth.items.tolist(), strict=True)) == \
        [(0, 0), (0, 2), (1, 1), (1, 3), (2, 0)]


@settings(max_examples=100, deadline=None)
@given(old=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4), st.integers(1, 3))),
       new=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4), st.integers(1, 3))))
def test_new_ground_truth_merged_into_the_stored_one_is_the_highest_grade_of_both(old, new):
    def truth(triples):
        table = np.array(triples, dtype=np.int64).reshape(-1, 3)
        return Truth.highest(table[:, 0], table[:, 1], table[:, 2].astype(np.float64), 5)

    a, b = truth(old), truth(new)
    a = Truth(a.rows, a.items.astype(np.int32), a.grades)  # as a decoded state holds it
    merged, gained = provisional.merge_truth(a, b, 5)
    expected = truth(old + new)
    np.testing.assert_array_equal(merged.rows, expected.rows)
    np.testing.assert_array_equal(merged.items, expected.items)
    np.testing.assert_array_equal(merged.grades, expected.grades)
    stored = {(r, i): g for r, i, g in zip(a.rows.tolist(), a.items.tolist(),
                                           a.grades.tolist(), strict=True)}
    assert gained.tolist() == [g > stored.get((r, i), 0.0) for r, i, g in
                               zip(b.rows.tolist(), b.items.tolist(), b.grades.tolist(),
                                   strict=True)]
