"""Provisional days: new interactions that answer one recompute only the users they change
(their lists read again), a day whose windows closed since is final as it stands (no log
read), an erasure sends its days back to the logs; every path ends in the tables of one
full rollup."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from itertools import zip_longest

import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import fresh_database, migrated
from tests.helpers import T0
from tests.rollup.scenario import WINDOW, assert_same_tables, create, dump, make_logs
from tests.rollup.test_rollup import _batches, _check_against_reference
from tracker import Tracker
from tracker.rollup import engine
from tracker.store import results

EARLY = T0  # before every impression: every day stays provisional


def _late_click(imps):
    """An interaction of the last day's first user, answering that user's impressions."""
    last_day = max(r["served_at"] for r in imps).date()
    on_last = sorted((r for r in imps if r["served_at"].date() == last_day),
                     key=lambda r: r["served_at"])
    imp = on_last[-1]
    late = {"event_id": "late", "user_id": imp["user_id"], "item_id": "never-served",
            "event": "purchase", "occurred_at": imp["served_at"] + timedelta(minutes=1)}
    return last_day, on_last, late


def _lists_of(user: str, on_day: list[dict]) -> int:
    return sum(r["user_id"] == user for r in on_day)


def test_a_late_click_on_a_provisional_day_reads_only_the_lists_of_the_user_it_answers(
        tracker):
    create(tracker)
    imps, events = make_logs(seed=41, days=3, users=8, impressions=60)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    last_day, on_last, late = _late_click(imps)
    tracker.log_interactions([late])
    (summary,) = tracker.rollup("home", now=EARLY)
    assert summary.days_recomputed == [last_day]
    assert summary.impressions_read == _lists_of(late["user_id"], on_last) < len(on_last)
    assert (summary.days_in_part, summary.users_recomputed) == (1, 1)
    _check_against_reference(tracker, imps, events + [late])
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=EARLY)
    assert dump(tracker.engine) == incremental


def test_a_day_final_since_is_published_from_its_stored_rows(tracker):
    """Windows closed since the days were computed, nothing new: the days are final as
    they stand, published from their stored rows without reading a log, and they equal
    one full rollup."""
    create(tracker)
    imps, events = make_logs(seed=42, days=2, users=6, impressions=30)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    later = max(r["served_at"] for r in imps) + timedelta(days=2)
    (summary,) = tracker.rollup("home", now=later)  # every window closed
    days = sorted({r["served_at"].date() for r in imps})
    assert summary.days_recomputed == days
    assert summary.days_final_as_stored == len(days)
    assert (summary.impressions_read, summary.truth_pairs_read) == (0, 0)  # no log read
    assert not tracker.metric_table("home")["provisional"].any()
    _check_against_reference(tracker, imps, events)
    final = dump(tracker.engine)
    tracker.rollup("home", full=True, now=later)
    assert dump(tracker.engine) == final


def test_a_day_final_under_the_grace_it_was_computed_with_stays_provisional_under_a_longer(
        tracker, settings):
    """The grace raised after a day was computed: at a clock past its old closing but
    before its new one, the day is published from its stored rows still provisional, and
    equals one full rollup with the new grace."""
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
        incremental = dump(longer.engine)
        longer.rollup("home", full=True, now=now)
        assert dump(longer.engine) == incremental


def test_a_late_click_on_a_day_final_since_recomputes_the_user_it_answers(tracker):
    """A day computed provisional whose windows closed since, answered by a late click:
    its changed user's lists are read again, the other days are final as they stand, and
    the day equals one full rollup's."""
    create(tracker)
    imps, events = make_logs(seed=43, days=2, users=6, impressions=30)
    last_day, on_last, late = _late_click(imps)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    tracker.log_interactions([late])
    later = max(r["served_at"] for r in imps) + timedelta(days=2)
    (summary,) = tracker.rollup("home", now=later)
    assert summary.impressions_read == _lists_of(late["user_id"], on_last)
    assert (summary.days_in_part, summary.users_recomputed) == (1, 1)
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
    stored per-user rows at once (they hold the user), and the next run
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
        for table in ("rollup_units", "rollup_exposure"):
            stored = {str(d) for (d,) in conn.execute(sa.text(
                f"SELECT DISTINCT day FROM {table} WHERE cumulative IS NOT TRUE"))}
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


def test_a_late_click_on_a_day_read_in_chunks_reads_only_its_users_lists(settings):
    """A day of several read chunks (1,000 impressions each): a late click of a user served
    once recomputes that user alone, one list read, and the day equals one full rollup."""
    imps, events = make_logs(seed=47, days=1, users=300, impressions=2_500)
    solo = dict(imps[0], impression_id="home-imp-solo", user_id="solo")
    imps.insert(0, solo)
    late = {"event_id": "late", "user_id": "solo", "item_id": solo["items"][0],
            "event": "purchase", "occurred_at": solo["served_at"] + timedelta(minutes=1)}
    with Tracker(settings=settings.replace(rollup_chunk_cells=1)) as tracker:
        create(tracker)
        tracker.log_impressions(imps, on_invalid="all_or_nothing")
        tracker.log_interactions(events, on_invalid="all_or_nothing")
        (first,) = tracker.rollup("home", now=EARLY)
        assert first.impressions_read == len(imps)
        tracker.log_interactions([late])
        (summary,) = tracker.rollup("home", now=EARLY)
        assert (summary.impressions_read, summary.users_recomputed) == (1, 1)
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
    recompute days for some of their users; the end equals one full rollup."""
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
    on the way (as they stand, or recomputed for the users a late click answers); the end
    equals one full rollup."""
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
