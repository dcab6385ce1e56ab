"""A day's popularity window advanced from the newest one stored (the pairs of the days
entering it added, those last seen before it dropped) is exactly the union of its days'
pairs; the rollup reads only the entering days' pairs, and counts from the union whenever the
stored window is missing or holds a day whose pairs changed since."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pyarrow as pa
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.rollup.scenario import create, dump, make_logs
from tracker.rollup.popularity import DayPairs, Popularity, WindowPairs, window_popularity
from tracker.store import results
from tracker.store.experiments import get_experiment

FIRST = date(2026, 1, 1)
START = datetime(2026, 11, 1, tzinfo=UTC)
EARLY = START  # before the first windows close: every day stays provisional


def _counts(popularity) -> tuple[dict[str, int], int]:
    return dict(zip(popularity.items.to_pylist(), popularity.users.tolist(),
                    strict=True)), popularity.n_users


day_pairs = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 5)), max_size=12).map(
    lambda pairs: DayPairs.of(pa.array([f"i{i}" for i, _ in pairs], pa.string()),
                              pa.array([f"u{u}" for _, u in pairs], pa.string())))


@settings(max_examples=150, deadline=None)
@given(days=st.lists(day_pairs, min_size=1, max_size=14), span=st.integers(1, 6),
       start=st.integers(0, 8), ahead=st.integers(1, 8))
def test_a_window_advanced_equals_the_union_of_its_days(days, span, start, ahead):
    on = {FIRST + timedelta(days=n): pairs for n, pairs in enumerate(days)}

    def between(first: date, last: date) -> list[tuple[date, DayPairs]]:
        return [(d, p) for d, p in sorted(on.items()) if first <= d <= last]

    old = FIRST + timedelta(days=start)
    new = old + timedelta(days=ahead)
    window = WindowPairs.of(old, between(old - timedelta(days=span), old - timedelta(days=1)))
    stored = WindowPairs.decode(window.encode())  # as the next run reads it
    advanced = stored.advanced(new, between(old, new - timedelta(days=1)), span)
    union = window_popularity([p for _, p in between(new - timedelta(days=span),
                                                     new - timedelta(days=1))])
    assert _counts(advanced.popularity()) == _counts(union)
    assert _counts(window.popularity()) == _counts(window_popularity(
        [p for _, p in between(old - timedelta(days=span), old - timedelta(days=1))]))


def _renamed(records: list[dict], tag: str) -> list[dict]:
    out = []
    for record in records:
        record = dict(record)
        for key in ("impression_id", "event_id"):
            if key in record:
                record[key] += tag
        out.append(record)
    return out


def _logs(tracker):
    """Three days logged and rolled up while provisional, and a fourth day's logs."""
    create(tracker)
    imps, events = make_logs(seed=51, days=3, users=8, impressions=45, start=START)
    more_imps, more_events = make_logs(seed=52, days=1, users=8, impressions=15,
                                       start=START + timedelta(days=3))
    return imps, events, _renamed(more_imps, "-4"), _renamed(more_events, "-4")


def _stored(tracker):
    """The days holding a stored window, and the day of the newest popularity."""
    with tracker.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT day, pairs IS NOT NULL FROM rollup_popularity "
                                    "ORDER BY day")).all()
    return [str(day) for day, kept in rows if kept], str(rows[-1][0])


def _union_of_stored(tracker, day: date):
    """The stored popularity of ``day`` and the union of its window's stored pairs."""
    days = tracker.settings.rollup_popularity_days
    with tracker.engine.connect() as conn:
        info = get_experiment(conn, "home")
        stored = results.popularity(conn, info.id, day, days)
        pairs = results.pairs(conn, info.id, day - timedelta(days=days),
                              day - timedelta(days=1))
    return Popularity.decode(stored), window_popularity([DayPairs.decode(v)
                                                         for v in pairs.values()])


def _reads_of_pairs(monkeypatch) -> list[tuple[date, date]]:
    asked: list[tuple[date, date]] = []
    read = results.pairs

    def spy(conn, experiment_id, first, last):
        asked.append((first, last))
        return read(conn, experiment_id, first, last)

    monkeypatch.setattr(results, "pairs", spy)
    return asked


def test_the_next_day_advances_the_stored_window_reading_only_the_days_entering_it(
        tracker, monkeypatch):
    imps, events, more_imps, more_events = _logs(tracker)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    kept, newest = _stored(tracker)
    assert kept == [newest]  # the newest popularity keeps its window, and only it
    asked = _reads_of_pairs(monkeypatch)
    tracker.log_impressions(more_imps, on_invalid="all_or_nothing")
    tracker.log_interactions(more_events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    new_day = min(r["served_at"] for r in more_imps).date()
    assert asked and all(first >= date.fromisoformat(newest) for first, _ in asked)
    assert _stored(tracker) == ([str(new_day)], str(new_day))
    popularity, union = _union_of_stored(tracker, new_day)
    assert _counts(popularity) == _counts(union)
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=EARLY)
    assert dump(tracker.engine) == incremental


def test_without_a_stored_window_the_union_is_counted_and_a_window_stored(
        tracker, monkeypatch):
    imps, events, more_imps, more_events = _logs(tracker)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    with tracker.engine.begin() as conn:
        conn.execute(sa.text("UPDATE rollup_popularity SET pairs = NULL"))
    asked = _reads_of_pairs(monkeypatch)
    tracker.log_impressions(more_imps, on_invalid="all_or_nothing")
    tracker.log_interactions(more_events, on_invalid="all_or_nothing")
    tracker.rollup("home", now=EARLY)
    new_day = min(r["served_at"] for r in more_imps).date()
    window = tracker.settings.rollup_popularity_days
    assert (new_day - timedelta(days=window), new_day - timedelta(days=1)) in asked
    assert _stored(tracker) == ([str(new_day)], str(new_day))
    popularity, union = _union_of_stored(tracker, new_day)
    assert _counts(popularity) == _counts(union)
    incremental = dump(tracker.engine)
    tracker.rollup("home", full=True, now=EARLY)
    assert dump(tracker.engine) == incremental


def test_a_window_holding_a_day_whose_pairs_changed_is_not_advanced(tracker):
    """A row committed below the watermark on the first day (no run sees it as new, so the
    plan drops no popularity): once that day is final its pairs hold it, and the next day's
    popularity, counted from the union, holds it too."""
    imps, events, more_imps, more_events = _logs(tracker)
    first_day = min(r["served_at"] for r in imps)
    late = {"event_id": "late", "user_id": next(
        r["user_id"] for r in imps if r["served_at"].date() == first_day.date()),
        "item_id": "only-late", "event": "click",
        "occurred_at": first_day.replace(hour=23, minute=0)}
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions([late], on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")  # ids above the late one
    interaction = sa.Table("interaction", sa.MetaData(), autoload_with=tracker.engine)
    with tracker.engine.begin() as conn:
        row = dict(conn.execute(sa.select(interaction).where(
            interaction.c.event_key == "late")).mappings().one())
        conn.execute(sa.delete(interaction).where(interaction.c.id == row["id"]))
    tracker.rollup("home", now=EARLY)
    with tracker.engine.begin() as conn:
        conn.execute(sa.insert(interaction).values(**row))  # below the watermark
    assert _stored(tracker)[0]  # a window is kept, holding the first day
    tracker.log_impressions(more_imps, on_invalid="all_or_nothing")
    tracker.log_interactions(more_events, on_invalid="all_or_nothing")
    new_day = min(r["served_at"] for r in more_imps).date()
    tracker.rollup("home", now=START + timedelta(days=3, hours=1))  # the first day is final
    popularity, union = _union_of_stored(tracker, new_day)
    assert "only-late" in _counts(union)[0]
    assert _counts(popularity) == _counts(union)
