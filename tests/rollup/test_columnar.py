"""The rollup's columnar path against the independent reference and brute force.

The rollup reads each chunk of a day's served lists as Arrow tables
(:func:`tracker.rollup.queries.served_lists`: PostgreSQL's COPY CSV with the lists joined by
``SEPARATOR``, SQLite's stored JSON text) and attributes and scores them in numpy
(:mod:`tracker.rollup.columnar`). These tests feed it ids that break naive splitting and
parsing, hand-written JSON, many chunks, and lists of mixed shapes, and compare every table
with :mod:`tests.rollup.reference`; the numpy kernels are checked against double loops.
"""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.conftest import BACKEND
from tests.rollup.scenario import RELEVANCE, create, make_logs
from tests.rollup.test_rollup import _check_against_reference
from tracker import Tracker, metrics
from tracker.errors import StoreError
from tracker.rollup import aggregate, columnar, queries
from tracker.rollup.aggregate import UnitTotals, without_crossed
from tracker.rollup.cells import is_crossed
from tracker.rollup.outcomes import Layout
from tracker.rollup.stores import decode_users, unpack
from tracker.rollup.truth import Truth, first_positions
from tracker.store import results
from tracker.store.experiments import get_experiment

NOW = datetime(2026, 11, 20, tzinfo=UTC)  # long after the logs: every day final
MIDNIGHT = datetime(2026, 11, 2, tzinfo=UTC)


def _log(tracker: Tracker, imps: list[dict], events: list[dict]) -> None:
    """Store the logs, or skip the test when the SDK refuses one of its ids (the ingest
    rules may tighten, e.g. on control characters: only accepted ids are tested)."""
    for write, records in ((tracker.log_impressions, imps),
                           (tracker.log_interactions, events)):
        try:
            result = write(records, on_invalid="all_or_nothing")
        except StoreError as exc:
            pytest.skip(f"the store does not accept these ids on {BACKEND}: {exc}")
        if result.rejected:
            pytest.skip(f"the SDK rejects these ids: {result.rejected[0].reason}")
        assert result.stored + result.duplicates == len(records), result


# ------------------------------------------------------------------ awkward ids

def _renamed(imps: list[dict], events: list[dict], fragment: str,
             only: set[int] | None = None) -> tuple[list[dict], list[dict]]:
    """The logs with ``fragment`` in many item, user and impression ids (one item id is the
    fragment itself); ``only``: rename within those impressions (and their events) only."""

    def item(name: str) -> str:
        n = int(name[1:])
        return (fragment if n == 0 else f"{fragment}{name}" if n % 3 == 1
                else f"{name}{fragment}" if n % 3 == 2 else name)

    def user(name: str) -> str:
        return f"{name}{fragment}" if int(name[1:]) % 2 == 0 else name

    def key(name: str) -> str:
        return f"{name}{fragment}" if int(name.rsplit("-", 1)[1]) % 2 == 0 else name

    def touched(n: int) -> bool:
        return only is None or n in only

    out_imps = []
    for n, imp in enumerate(imps):
        if not touched(n):
            out_imps.append(imp)
            continue
        imp = dict(imp, user_id=user(imp["user_id"]), impression_id=key(imp["impression_id"]),
                   items=[item(i) for i in imp["items"]])
        if imp.get("baseline_items"):
            imp["baseline_items"] = [item(i) for i in imp["baseline_items"]]
        out_imps.append(imp)
    out_events = []
    for event in events:
        n = int(event["event_id"].split("-")[2])  # "home-evt-{impression}-{e}"
        if not touched(n):
            out_events.append(event)
            continue
        event = dict(event, user_id=user(event["user_id"]), item_id=item(event["item_id"]))
        if event.get("impression_id"):
            event["impression_id"] = key(event["impression_id"])
        out_events.append(event)
    return out_imps, out_events


AWKWARD = [
    pytest.param("\x1f", id="unit-separator-postgresql-reads-arrays"),
    pytest.param("a\x1f\x1fb", id="two-separators"),
    pytest.param(",", id="comma"),
    pytest.param('"', id="double-quote"),
    pytest.param('","', id="json-item-separator-text"),
    pytest.param('["x"]', id="json-array-text"),
    pytest.param("\\", id="backslash"),
    pytest.param("\\\\", id="two-backslashes"),
    pytest.param("\n", id="line-feed"),
    pytest.param("\r\n", id="carriage-return-line-feed"),
    pytest.param("\r", id="carriage-return"),
    pytest.param("\t", id="tab"),
    pytest.param(" ", id="space"),
    pytest.param("é", id="latin-accent"),
    pytest.param("🎵", id="emoji"),
    pytest.param("音楽", id="cjk"),
    pytest.param("\u2028", id="unicode-line-separator"),
    pytest.param("\\u0041", id="json-escape-looking-text"),
    pytest.param('\\"', id="escaped-quote-looking-text"),
    pytest.param("NULL", id="null-word"),
    pytest.param("\x00", id="nul"),
    pytest.param("\x01", id="control-character"),
    pytest.param('\x1f,"\n\\é🎵', id="everything-at-once"),
]


@pytest.mark.parametrize("fragment", AWKWARD)
def test_awkward_ids_give_the_reference_tables(tracker, fragment):
    if "\x00" in fragment and BACKEND == "postgresql":
        pytest.skip("PostgreSQL text cannot hold NUL (U+0000)")
    # three days, surprisal from the popularity of the renamed items in the reference
    # period (make_logs' history); baselines share the renamed items (unexpectedness
    # overlaps)
    create(tracker)
    imps, events = _renamed(*make_logs(seed=21, days=3, users=10, impressions=60,
                                       history=20), fragment)
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    _check_against_reference(tracker, imps, events)


def test_awkward_ids_in_some_lists_of_a_chunk_only(tracker):
    # the PostgreSQL fallback reads the whole chunk as arrays: the plain lists must come
    # out the same way too
    create(tracker)
    imps, events = make_logs(seed=22, days=1, users=10, impressions=50,
                             start=MIDNIGHT)
    imps, events = _renamed(imps, events, '\x1f"\n,', only={3, 17, 40})
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    _check_against_reference(tracker, imps, events)


# ------------------------------------------------------------------ hand-written JSON

def _padded(items: list[str]) -> str:
    return "[ " + ", ".join(json.dumps(i, ensure_ascii=False) for i in items) + " ]"


def _padded_brackets_only(items: list[str]) -> str:
    return "[ " + ",".join(json.dumps(i, ensure_ascii=False) for i in items) + " ]"


JSON_LAYOUTS = [
    pytest.param(lambda items: json.dumps(items, ensure_ascii=False), id="space-after-comma"),
    pytest.param(lambda items: json.dumps(items, ensure_ascii=False, indent=2), id="indented"),
    pytest.param(_padded, id="padded-brackets-and-commas"),
    pytest.param(_padded_brackets_only, id="padded-brackets-minified-commas"),
    pytest.param(lambda items: json.dumps(items, separators=(",", ":"), ensure_ascii=False)
                 + " ", id="trailing-space"),
    pytest.param(lambda items: " " + json.dumps(items, separators=(",", ":"),
                                                ensure_ascii=False), id="leading-space"),
    pytest.param(lambda items: json.dumps(items, separators=(",", ":")), id="ascii-escapes"),
    pytest.param(lambda items: json.dumps(items, separators=(" , ", ":"), ensure_ascii=False),
                 id="spaces-around-commas"),
]


@pytest.mark.skipif(BACKEND != "sqlite", reason="SQLite stores lists as JSON text")
@pytest.mark.parametrize("layout", JSON_LAYOUTS)
def test_sqlite_reads_json_that_is_not_minified(tracker, layout):
    create(tracker)
    imps, events = make_logs(seed=23, days=2, users=8, impressions=40)
    imps, events = _renamed(imps, events, "é")  # non-ASCII: raw in the JSON text
    for imp in imps[::4]:  # lists of one item too: they split differently
        imp["items"] = imp["items"][:1]
    _log(tracker, imps, events)
    with tracker.engine.begin() as conn:  # every other row rewritten by hand
        for imp in imps[::2]:
            conn.execute(sa.text("UPDATE impression SET items = :items, baseline_items = "
                                 ":baseline WHERE impression_key = :key"),
                         {"items": layout(imp["items"]), "key": imp["impression_id"],
                          "baseline": None if imp.get("baseline_items") is None
                          else layout(imp["baseline_items"])})
    tracker.rollup("home", now=NOW)
    _check_against_reference(tracker, imps, events)


# ------------------------------------------------------------------ many chunks

def _spy_chunks(monkeypatch) -> list[list[tuple[int, int]]]:
    """Record the chunk bounds the rollup asks for (one list per call)."""
    calls: list[list[tuple[int, int]]] = []
    real = queries.chunk_bounds

    def spy(*args, **kwargs):
        bounds = real(*args, **kwargs)
        calls.append(bounds)
        return bounds

    monkeypatch.setattr(queries, "chunk_bounds", spy)
    return calls


def _big_day() -> tuple[list[dict], list[dict]]:
    """One day of 2,100 impressions of 40 users (every user in every chunk), with a lighter
    day before it (popularity, surprisal); awkward ids in the impressions of one stretch."""
    before_imps, before_events = make_logs(seed=31, days=1, users=40, impressions=80,
                                           start=MIDNIGHT - timedelta(days=1))
    for imp in before_imps:
        imp["impression_id"] = "pre-" + imp["impression_id"]
    for event in before_events:
        event["event_id"] = "pre-" + event["event_id"]
        if event.get("impression_id"):
            event["impression_id"] = "pre-" + event["impression_id"]
    imps, events = make_logs(seed=32, days=1, users=40, impressions=2100, start=MIDNIGHT)
    imps, events = _renamed(imps, events, '\x1f"\n', only=set(range(1200, 1260)))
    return before_imps + imps, before_events + events


def _tables(tracker: Tracker) -> dict:
    return {(part, cumulative): getattr(tracker, f"{part}_table")("home", cumulative)
            for part in ("metric", "health") for cumulative in (False, True)}


def test_many_chunks_give_the_tables_of_one_chunk(tracker, monkeypatch):
    create(tracker)
    imps, events = _big_day()
    # interactions naming an impression in every chunk (1,000 impressions each, in id order)
    keyed = {int(e["impression_id"].rsplit("-", 1)[1].rstrip('\x1f"\n')) // 1_000
             for e in events if e.get("impression_id", "").startswith("home")}
    assert keyed == {0, 1, 2}
    _log(tracker, imps, events)
    calls = _spy_chunks(monkeypatch)
    tracker.rollup("home", now=NOW)
    assert all(len(bounds) == 1 for bounds in calls)  # the default: the day in one chunk
    one_chunk = _tables(tracker)
    calls.clear()
    with Tracker(settings=tracker.settings.replace(rollup_chunk_cells=1)) as small:
        small.rollup("home", full=True, now=NOW)
        assert max((len(bounds) for bounds in calls), default=1) > 1, "one chunk only"
        many_chunks = _tables(small)
        _check_against_reference(small, imps, events)
    for part, frame in one_chunk.items():
        assert len(frame) > 0
        pd.testing.assert_frame_equal(many_chunks[part], frame, check_exact=False, rtol=1e-9,
                                      atol=1e-9)


@pytest.mark.parametrize("interleaved", [
    pytest.param(False, id="a-day-whose-ids-are-one-run-is-chunked-without-reading-them"),
    pytest.param(True, id="a-day-whose-ids-are-interleaved-reads-them-for-its-bounds"),
])
def test_chunk_bounds_are_those_of_the_day_ids(tracker, monkeypatch, interleaved):
    create(tracker)
    imps, events = _big_day()
    day = [imp for imp in imps if not imp["impression_id"].startswith("pre-")]
    before = [imp for imp in imps if imp["impression_id"].startswith("pre-")]
    batches = [day[:1000], before, day[1000:]] if interleaved else [before + day]
    for n, batch in enumerate(batches, 1):  # interleaved: the day before's between halves
        _log(tracker, batch, events if n == len(batches) else [])
    calls, read = _spy_chunks(monkeypatch), []
    real = queries.day_ids
    monkeypatch.setattr(queries, "day_ids", lambda *args: read.append(args) or real(*args))
    with Tracker(settings=tracker.settings.replace(rollup_chunk_cells=1)) as small:
        small.rollup("home", full=True, now=NOW)
        _check_against_reference(small, imps, events)
    with tracker.engine.connect() as conn:
        ids = conn.execute(sa.text("SELECT id FROM impression WHERE served_at >= :start "
                                   "ORDER BY id"), {"start": int(MIDNIGHT.timestamp() * 1e6)}
                           ).scalars().all()
    assert len(ids) == len(day) > 1_000
    assert (ids[-1] - ids[0] + 1 > len(ids)) == interleaved
    expected = queries.chunk_bounds(np.array(ids), 1_000)  # rows: the floor of 1,000
    assert calls and all(bounds == expected for bounds in calls), calls
    assert bool(read) == interleaved


def test_a_final_first_days_checkpoint_holds_its_daily_totals_one_row_per_user(tracker):
    create(tracker)
    imps, events = make_logs(seed=5, days=1, users=12, impressions=60, start=MIDNIGHT)
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    with tracker.engine.connect() as conn:
        info = get_experiment(conn, "home")
        layout = Layout.for_cutoffs(list(info.cutoffs))
        daily = UnitTotals.decode(results.units(conn, info.id, MIDNIGHT.date(), False), layout)
        assert results.units(conn, info.id, MIDNIGHT.date(), True) is None  # not a blob
        checkpoint = conn.execute(sa.text("SELECT day FROM rollup_checkpoint")).scalar()
        rows = conn.execute(sa.text("SELECT user_id, data FROM rollup_user_totals "
                                    "ORDER BY user_id")).all()
    assert str(checkpoint)[:10] == MIDNIGHT.date().isoformat()
    assert [user for user, _ in rows] == sorted(set(r["user_id"] for r in imps))
    with_cells = decode_users([(u, unpack(bytes(d))) for u, d in rows], len(layout))
    # besides, a crossover user's row in the crossover cell of their first arm
    crossed = with_cells.users.filter(is_crossed(with_cells.cells)).to_pylist()
    arms_of: dict[str, set] = {}
    for r in imps:
        arms_of.setdefault(r["user_id"], set()).add(r["arm"])
    assert crossed == sorted(u for u, arms in arms_of.items() if len(arms) > 1)
    stored = without_crossed(with_cells)
    assert stored.users.to_pylist() == daily.users.to_pylist()
    for name in ("cells", "impressions", "sums", "counts"):
        assert np.array_equal(getattr(stored, name), getattr(daily, name)), name
    _check_against_reference(tracker, imps, events)


def test_unit_totals_stored_in_many_parts_give_the_same_tables(tracker, monkeypatch):
    # the parts bound what one rollup_units row holds (a PostgreSQL value or a SQLite blob
    # holds at most 1 GiB); here a few users a part, over days that the cumulative pass
    # reads back part by part
    create(tracker)
    imps, events = _big_day()
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    whole = _tables(tracker)
    monkeypatch.setattr(aggregate, "PART_BYTES", 8 * 31 * 3)  # 3 users a part
    tracker.rollup("home", full=True, now=NOW)
    with tracker.engine.connect() as conn:
        parts = conn.execute(sa.text("SELECT day, cumulative, count(*), max(part) + 1 "
                                     "FROM rollup_units GROUP BY day, cumulative")).all()
    assert parts and all(n == last and n > 5 for _, _, n, last in parts), parts
    for part, frame in _tables(tracker).items():
        pd.testing.assert_frame_equal(frame, whole[part], check_exact=False, rtol=1e-9,
                                      atol=1e-9)
    _check_against_reference(tracker, imps, events)


# ------------------------------------------------------------------ list shapes

def _shaped_logs(seed: int, shape: str) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    catalog = [f"s{n}" for n in range(30)]
    imps, events = [], []
    for n in range(60):
        user = f"u{rng.randrange(8)}"
        served = MIDNIGHT - timedelta(days=1) + timedelta(seconds=rng.randrange(2 * 86_400))
        length = 6 if shape == "one-length" else rng.randint(1, 12)
        record = {"impression_id": f"imp-{n}", "experiment": "home",
                  "arm": "control" if int(user[1:]) % 2 else "treatment", "user_id": user,
                  "items": rng.sample(catalog, length), "served_at": served}
        if shape == "one-length":
            record["baseline_items"] = rng.sample(catalog, 9)  # longer than every cutoff
        elif shape == "mixed" and rng.random() < 0.5:
            record["baseline_items"] = rng.sample(catalog, rng.randint(1, 12))
        imps.append(record)
        for e in range(rng.randint(0, 3)):
            item = rng.choice(record["items"]) if rng.random() < 0.7 else rng.choice(catalog)
            events.append({"event_id": f"evt-{n}-{e}", "user_id": user, "item_id": item,
                           "event": rng.choice(list(RELEVANCE)),
                           "occurred_at": served + timedelta(minutes=rng.choice([0, 5, 360]))})
    return imps, events


@pytest.mark.parametrize("shape", [
    pytest.param("mixed", id="lengths-1-to-12-some-baselines-null-some-short-some-long"),
    pytest.param("one-length", id="every-list-and-baseline-one-length"),
    pytest.param("no-baselines", id="no-baseline-in-the-chunk"),
])
def test_list_shapes_in_one_chunk(tracker, shape):
    create(tracker)
    imps, events = _shaped_logs(41, shape)
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    _check_against_reference(tracker, imps, events)


def test_empty_baseline_list_counts_as_no_baseline(tracker):
    # the SDK may refuse [] (it does at the time of writing); a row can still hold one
    # (written before that rule, or by hand): the reference, like docs/rollup.md, counts
    # unexpectedness only for impressions with a baseline to compare with
    create(tracker)
    imps, events = _shaped_logs(42, "mixed")
    imps[0]["baseline_items"] = []
    if tracker.log_impressions(imps[:1], on_invalid="all_or_nothing").rejected:
        imps[0]["baseline_items"] = None
        _log(tracker, imps, events)
        empty = "'{}'" if BACKEND == "postgresql" else "'[]'"
        with tracker.engine.begin() as conn:
            conn.execute(sa.text(f"UPDATE impression SET baseline_items = {empty} "
                                 "WHERE impression_key = :key"), {"key": imps[0]["impression_id"]})
        imps[0]["baseline_items"] = []
    else:
        _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    _check_against_reference(tracker, imps, events)


# ------------------------------------------------------------------ numpy kernels

def _brute_pairs(imp_user, imp_served, it_user, it_at, window) -> list[tuple[int, int]]:
    return sorted((i, j) for i in range(imp_user.size) for j in range(it_user.size)
                  if imp_user[i] == it_user[j]
                  and imp_served[i] <= it_at[j] <= imp_served[i] + window)


def _pairs(imp_user, imp_served, it_user, it_at, window) -> list[tuple[int, int]]:
    imp, it = columnar.attribute(np.asarray(imp_user, dtype=np.int64),
                                 np.asarray(imp_served, dtype=np.int64),
                                 np.asarray(it_user, dtype=np.int64),
                                 np.asarray(it_at, dtype=np.int64), window)
    return sorted(zip(imp.tolist(), it.tolist(), strict=True))


@pytest.mark.parametrize(("at", "answers"), [
    pytest.param(100, True, id="at-serving-time-counts"),
    pytest.param(110, True, id="at-window-end-counts"),
    pytest.param(99, False, id="just-before-serving-not"),
    pytest.param(111, False, id="just-after-window-not"),
])
def test_attribute_window_ends(at, answers):
    pairs = _pairs([0, 1], [100, 100], [0, 1, 2], [at, at, at], 10)
    assert pairs == ([(0, 0), (1, 1)] if answers else [])


def test_attribute_equal_served_times_all_answered():
    pairs = _pairs([3, 3, 3, 1], [50, 50, 45, 50], [3], [55], 10)
    assert pairs == [(0, 0), (1, 0), (2, 0)]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), base=st.sampled_from([0, 1_790_000_000_000_000]))
def test_attribute_equals_a_double_loop(data, base):
    n_imp = data.draw(st.integers(0, 25))
    n_it = data.draw(st.integers(0, 25))
    users = st.integers(0, 4)  # user 4: interactions only, or impressions only
    imp_user = data.draw(hnp.arrays(np.int64, n_imp, elements=st.integers(0, 3)))
    imp_served = base + data.draw(hnp.arrays(np.int64, n_imp, elements=st.integers(0, 30)))
    it_user = data.draw(hnp.arrays(np.int64, n_it, elements=users))
    it_at = base + data.draw(hnp.arrays(np.int64, n_it, elements=st.integers(-5, 45)))
    window = data.draw(st.integers(0, 12))
    assert _pairs(imp_user, imp_served, it_user, it_at, window) == _brute_pairs(
        imp_user, imp_served, it_user, it_at, window)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), base=st.sampled_from([0, 1_790_000_000_000_000]), fits=st.booleans())
def test_attribute_of_sorted_interactions_equals_a_double_loop(data, base, fits, monkeypatch):
    n_imp = data.draw(st.integers(0, 25))
    n_it = data.draw(st.integers(0, 25))
    imp_user = data.draw(hnp.arrays(np.int64, n_imp, elements=st.integers(0, 3)))
    imp_served = base + data.draw(hnp.arrays(np.int64, n_imp, elements=st.integers(0, 30)))
    it_user = data.draw(hnp.arrays(np.int64, n_it, elements=st.integers(0, 4)))
    it_at = base + data.draw(hnp.arrays(np.int64, n_it, elements=st.integers(-5, 45)))
    if data.draw(st.booleans()):  # as Interactions holds them; else the order is checked
        order = np.lexsort((it_at, it_user))
        it_user, it_at = it_user[order], it_at[order]
    window = data.draw(st.integers(-3, 12))  # a negative window answers nothing
    with monkeypatch.context() as patch:
        if not fits:  # keys "would not fit": attribute's own search
            patch.setattr(columnar, "_PACKED_LIMIT", 0)
        runs = columnar.answer_runs(imp_user, imp_served, it_user, it_at, window)
        imp, it = columnar.pairs_of(runs, imp_user, imp_served, it_user, it_at, window)
    assert sorted(zip(imp.tolist(), it.tolist(), strict=True)) == _brute_pairs(
        imp_user, imp_served, it_user, it_at, window)


def test_interactions_are_sorted_by_user_then_time_with_their_items_and_grades():
    table = pa.table({"user": ["b", "a", "b", "a", "c"], "item": ["i1", "i2", "i3", "i4", "i5"],
                      "event": ["click", "save", "play", "click", "view"],
                      "at": pa.array([30, 20, 10, 40, 5], pa.int64())})
    users = columnar.Vocabulary()
    users.encode([pa.array(["a", "b"])])  # a: code 0, b: 1, c: 2 when met
    got = columnar.Interactions.of(table, {"click": 1.0, "save": 2.0, "play": 3.0}, users)
    assert got.users.tolist() == sorted(got.users.tolist())
    rows = list(zip(got.users.tolist(), got.at.tolist(), got.items.to_pylist(),
                    got.grades.tolist(), strict=True))
    assert [(at, item, grade) for _, at, item, grade in rows] == \
        [(20, "i2", 2.0), (40, "i4", 1.0), (10, "i3", 3.0), (30, "i1", 1.0)]  # "view": 0


def _padded_rows(rows: list[list[int]], width: int, pad: int) -> np.ndarray:
    out = np.full((len(rows), width), pad, dtype=np.int64)
    for r, row in enumerate(rows):
        out[r, :len(row)] = row
    return out


lists_of_codes = st.lists(st.lists(st.integers(0, 5), max_size=7), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 9),
                                st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 1e300]))),
       n_items=st.sampled_from([10, 13]), packed=st.booleans())
def test_truth_keeps_each_pair_once_with_its_highest_grade(pairs, n_items, packed,
                                                           monkeypatch):
    expected: dict[tuple[int, int], float] = {}
    for row, item, grade in pairs:
        expected[row, item] = max(grade, expected.get((row, item), grade))
    table = np.array(pairs, dtype=np.float64).reshape(-1, 3)
    with monkeypatch.context() as patch:
        if not packed:  # the keys "would not fit": the argsort
            patch.setattr(columnar, "_PACKED_LIMIT", 0)
        truth = Truth.highest(table[:, 0].astype(np.int64),
                                       table[:, 1].astype(np.int32), table[:, 2], n_items)
    assert truth.items.dtype == np.int32
    assert list(zip(truth.rows.tolist(), truth.items.tolist(), truth.grades.tolist(),
                    strict=True)) == sorted((r, i, g) for (r, i), g in expected.items())


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lists=lists_of_codes, data=st.data(), block=st.sampled_from([None, 1, 5]))
def test_first_positions_first_occurrence_wins(lists, data, block, monkeypatch):
    width = max(1, max(map(len, lists)))
    items = _padded_rows(lists, width, -1)
    rows = np.array(data.draw(st.lists(st.integers(0, len(lists) - 1), max_size=20)),
                    dtype=np.int64)
    codes = np.array(data.draw(st.lists(st.integers(0, 6), min_size=rows.size,
                                        max_size=rows.size)), dtype=np.int64)
    expected = [lists[r].index(c) + 1 if c in lists[r] else 0
                for r, c in zip(rows.tolist(), codes.tolist(), strict=True)]
    with monkeypatch.context() as patch:
        if block is not None:  # tiny blocks: several passes
            patch.setattr(columnar, "BLOCK_CELLS", block)
        assert first_positions(items, rows, codes).tolist() == expected


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(served=lists_of_codes, data=st.data(), block=st.sampled_from([None, 1, 7]),
       cutoffs=st.lists(st.integers(1, 8), min_size=1, max_size=4, unique=True).map(sorted))
def test_overlaps_are_set_intersections_as_in_unexpectedness(served, data, cutoffs, block,
                                                              monkeypatch):
    # as the rollup calls it: the served top max(k), baselines up to their longest (<= top)
    baselines = data.draw(st.lists(st.lists(st.integers(0, 7), max_size=9),
                                   min_size=len(served), max_size=len(served)))
    top = max(cutoffs)
    width = max(1, max(map(len, served)))
    items = _padded_rows(served, width, -1)[:, :top]
    base_width = min(top, max(map(len, baselines)))
    baseline = _padded_rows([b[:base_width] for b in baselines], base_width, -2)
    with monkeypatch.context() as patch:
        if block is not None:
            patch.setattr(columnar, "BLOCK_CELLS", block)
        overlap = columnar._overlaps(items, baseline, cutoffs)
    for j, k in enumerate(cutoffs):
        brute = [len(set(r[:k]) & set(b[:k])) for r, b in zip(served, baselines, strict=True)]
        assert overlap[:, j].tolist() == brute, k
        unexpected = metrics.unexpectedness(served, baselines, k)
        for r, row in enumerate(served):
            if row:  # the metric: 1 - |R_k ∩ B_k| / k on a served list
                assert math.isclose(unexpected[r], 1 - overlap[r, j] / k, abs_tol=1e-12)


def test_a_chunk_bigger_than_a_csv_block_with_line_breaks_in_its_items(tracker):
    # PostgreSQL: pyarrow parses the COPY text in blocks of 16 MiB; a block that ends inside
    # a quoted item holding a line break needs the exact (newlines_in_values) parse.
    # ~80 lists of 1,000 items of ~250 characters: about 20 MB in one chunk.
    create(tracker)
    rng = random.Random(51)
    catalog = ["\n".join(f"{n:05d}" + "x" * 44 for _ in range(5)) + f"\r\n{n}"
               for n in range(2_500)]
    imps, events = [], []
    for n in range(80):
        user = f"u{n % 9}"
        served = MIDNIGHT + timedelta(minutes=15 * n)
        items = rng.sample(catalog, 1_000)
        imps.append({"impression_id": f"imp-{n}", "experiment": "home",
                     "arm": "control" if n % 9 % 2 else "treatment", "user_id": user,
                     "items": items, "served_at": served,
                     "baseline_items": rng.sample(items[:8] + catalog[:8], 6)})
        for e in range(3):
            events.append({"event_id": f"evt-{n}-{e}", "user_id": user,
                           "item_id": items[rng.randrange(6)], "event": "click",
                           "occurred_at": served + timedelta(minutes=e)})
    _log(tracker, imps, events)
    tracker.rollup("home", now=NOW)
    _check_against_reference(tracker, imps, events)
