"""A provisional day scored again from its state runs in a thread while the days after it
are read, their scores waiting for it (:mod:`tracker.rollup.engine`): the run gives the
tables of a full rollup and of the same rows rolled up one step at a time (no day beside
another), a later day's chunks are read but not scored while it runs, and an error in the
thread fails the run (its waiting scores too) before anything the report reads changes."""

from __future__ import annotations

import threading

import pytest

from tests.conftest import fresh_database, migrated
from tests.rollup.scenario import create, dump, make_logs
from tests.rollup.test_provisional import EARLY
from tests.rollup.test_provisional import _late_click as late_click
from tests.rollup.test_rollup import _check_against_reference
from tracker import Tracker
from tracker.rollup import engine
from tracker.rollup.day import DayScorer

WAIT = 60  # seconds the thread waits for the next day to start (it starts at once)


def _split(imps, events):
    """The first day's rows; the later days' rows with a late click answering the first
    day's last impression (so the first day is scored again from its state)."""
    first = min(r["served_at"] for r in imps).date()
    early = [r for r in imps if r["served_at"].date() == first]
    before = [e for e in events if e["occurred_at"].date() == first]
    _, _, late = late_click(early)
    later_imps = [r for r in imps if r["served_at"].date() != first]
    later_events = [e for e in events if e["occurred_at"].date() != first]
    return first, (early, before), (later_imps, later_events + [late])


def _log(tracker, imps, events) -> None:
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")


def _seen_beside(monkeypatch) -> dict:
    """The engine's rescoring made to wait until a whole day's computation has started
    (it never would if the two ran one after the other); what it saw recorded."""
    started, seen = threading.Event(), {}
    rescore, recompute = engine.rescore_users, engine.recompute_day

    def recompute_day(run, day, summary):
        started.set()
        return recompute(run, day, summary)

    def rescore_users(run, day, *args):
        seen[day] = (threading.current_thread() is threading.main_thread(),
                     started.wait(WAIT))
        return rescore(run, day, *args)

    monkeypatch.setattr(engine, "recompute_day", recompute_day)
    monkeypatch.setattr(engine, "rescore_users", rescore_users)
    return seen


def test_a_day_rescored_beside_the_next_gives_the_tables_of_a_full_rollup(tracker,
                                                                          monkeypatch):
    create(tracker)
    imps, events = make_logs(seed=61, days=3, users=10, impressions=90)
    first, early, later = _split(imps, events)
    _log(tracker, *early)
    tracker.rollup("home", now=EARLY)
    _log(tracker, *later)
    seen = _seen_beside(monkeypatch)
    progress = []
    (summary,) = engine.run_rollup(tracker.engine, tracker.settings, "home", now=EARLY,
                                   progress=lambda *step: progress.append(step))
    assert seen == {first: (False, True)}  # in a thread, while a later day was computed
    assert summary.days_recomputed[0] == first and len(summary.days_recomputed) > 1
    assert summary.days_in_part == 1 and summary.users_recomputed > 0  # the thread's counts
    assert [(stage, done, day) for stage, done, _, day in progress if stage == "day"] == \
        [("day", n, day) for n, day in enumerate(summary.days_recomputed, 1)]  # in order
    _check_against_reference(tracker, imps, events + [later[1][-1]])
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=EARLY)
    assert dump(tracker.engine) == incremental


def test_a_day_rescored_beside_the_next_gives_the_tables_of_one_step_at_a_time(tracker,
                                                                               tmp_path):
    """The same rows, the first day scored again alone (its late click rolled up before
    the later days arrive): the same tables as when it ran beside them."""
    imps, events = make_logs(seed=62, days=3, users=10, impressions=90)
    _, early, (later_imps, later_events) = _split(imps, events)
    steps = [early, ([], later_events[-1:]), (later_imps, later_events[:-1])]
    create(tracker)
    for imps_, events_ in (steps[0], (later_imps, later_events)):
        _log(tracker, imps_, events_)
        tracker.rollup("home", now=EARLY)
    with fresh_database(tmp_path) as url, Tracker(migrated(url)) as alone:
        create(alone)
        for imps_, events_ in steps:
            _log(alone, imps_, events_)
            alone.rollup("home", now=EARLY)
        assert dump(tracker.engine) == dump(alone.engine)


def test_an_error_in_the_rescoring_thread_fails_the_run_and_publishes_nothing(tracker,
                                                                              monkeypatch):
    create(tracker)
    imps, events = make_logs(seed=63, days=3, users=10, impressions=90)
    _, early, later = _split(imps, events)
    _log(tracker, *early)
    tracker.rollup("home", now=EARLY)
    before = dump(tracker.engine, without=("rollup_units", "rollup_exposure"))
    _log(tracker, *later)

    def failing(*args):
        raise RuntimeError("the rescoring failed")

    monkeypatch.setattr(engine, "rescore_users", failing)
    with pytest.raises(RuntimeError, match="the rescoring failed"):
        tracker.rollup("home", now=EARLY)
    assert dump(tracker.engine, without=("rollup_units", "rollup_exposure")) == before
    monkeypatch.undo()
    tracker.rollup("home", now=EARLY)
    again = dump(tracker.engine)
    tracker.rollup("home", full=True, now=EARLY)
    assert dump(tracker.engine) == again


def _rescoring_waits_for_a_read(monkeypatch, fail: bool = False) -> dict:
    """The engine's rescoring made to wait until a later day's chunk was read (it never
    would if the reads waited for it), then to run (or to fail); whether a later day's
    chunk was scored before it ended recorded."""
    read, ended, seen = threading.Event(), threading.Event(), {"scored_during": []}
    rescore = engine.rescore_users
    read_chunk, score_chunk = DayScorer.read_chunk, DayScorer.score_chunk

    def reading(self, chunk):
        tables = read_chunk(self, chunk)
        read.set()
        return tables

    def scoring(self, tables):
        seen["scored_during"].append(not ended.is_set())
        return score_chunk(self, tables)

    def rescore_users(run, day, *args):
        try:
            seen["read_first"] = read.wait(WAIT)
            if fail:
                raise RuntimeError("the rescoring failed")
            return rescore(run, day, *args)
        finally:
            ended.set()

    monkeypatch.setattr(DayScorer, "read_chunk", reading)
    monkeypatch.setattr(DayScorer, "score_chunk", scoring)
    monkeypatch.setattr(engine, "rescore_users", rescore_users)
    return seen


def test_the_next_day_is_read_while_a_day_is_rescored_but_scored_after_it(tracker,
                                                                         monkeypatch):
    create(tracker)
    imps, events = make_logs(seed=64, days=3, users=10, impressions=90)
    _, early, later = _split(imps, events)
    _log(tracker, *early)
    tracker.rollup("home", now=EARLY)
    _log(tracker, *later)
    seen = _rescoring_waits_for_a_read(monkeypatch)
    tracker.rollup("home", now=EARLY)
    assert seen["read_first"]  # a later day's chunk read while the rescoring waited
    assert seen["scored_during"] and not any(seen["scored_during"])  # none scored then
    monkeypatch.undo()
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=EARLY)
    assert dump(tracker.engine) == incremental


def test_a_rescoring_failing_while_the_next_day_waits_fails_the_run(tracker, monkeypatch):
    """The later day's scores wait for the rescoring when it fails: they raise its error
    (they are not left waiting) and the run fails, publishing nothing."""
    create(tracker)
    imps, events = make_logs(seed=65, days=3, users=10, impressions=90)
    _, early, later = _split(imps, events)
    _log(tracker, *early)
    tracker.rollup("home", now=EARLY)
    before = dump(tracker.engine, without=("rollup_units", "rollup_exposure"))
    _log(tracker, *later)
    seen = _rescoring_waits_for_a_read(monkeypatch, fail=True)
    outcome = {}

    def run() -> None:
        try:
            tracker.rollup("home", now=EARLY)
        except RuntimeError as error:
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive()  # nothing left waiting
    assert seen["read_first"] and not seen["scored_during"]  # it failed as the day waited
    assert str(outcome["error"]) == "the rescoring failed"
    monkeypatch.undo()
    assert dump(tracker.engine, without=("rollup_units", "rollup_exposure")) == before
