"""The stored rollup state (tracker.rollup.state): every format reads back what was written,
by column name; another layout, format or version is read correctly or refused with the way
out (``tracker rollup --full``), never misread."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date, timedelta

import numpy as np
import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import T0
from tests.rollup.scenario import create, make_logs
from tests.rollup.test_rollup import NOW
from tracker.errors import StaleState
from tracker.rollup import state
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.exposure import Exposure
from tracker.rollup.outcomes import Layout
from tracker.rollup.popularity import Popularity
from tracker.rollup.stores import decode_users, encode_users, pack, unpack

LAYOUT = Layout.for_cutoffs([5, 10])


def _totals(rows: int, layout: Layout = LAYOUT, seed: int = 0) -> UnitTotals:
    rng = np.random.default_rng(seed)
    impressions = rng.integers(1, 9, rows)
    counts = np.asfortranarray(np.repeat(impressions[:, None], len(layout), axis=1)
                               .astype(np.float64))
    counts[:, 0] = rng.integers(0, 2, rows) * impressions  # a column undefined on some units
    return UnitTotals(pa.array([f"user-{i}" for i in range(rows)], pa.string()),
                      rng.integers(1, 4, rows), impressions,
                      np.asfortranarray(rng.random((rows, len(layout)))), counts)


def _equal(a: UnitTotals, b: UnitTotals) -> None:
    assert a.users.to_pylist() == b.users.to_pylist()
    np.testing.assert_array_equal(a.cells, b.cells)
    np.testing.assert_array_equal(a.impressions, b.impressions)
    np.testing.assert_array_equal(a.sums, b.sums)
    np.testing.assert_array_equal(a.counts, b.counts)


def _rewrite(data: bytes, fmt: str, change) -> bytes:
    """The stream with its table changed by ``change``, its metadata kept."""
    table = state.read(data, fmt)
    return state.write(change(table), fmt, **{
        k.decode().removeprefix("tracker."): v.decode()
        for k, v in table.schema.metadata.items() if k != state.FORMAT})


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(0, 40), seed=st.integers(0, 2**16))
def test_unit_totals_read_back_what_was_written(rows, seed):
    totals = _totals(rows, seed=seed)
    _equal(UnitTotals.decode(totals.encode(LAYOUT), LAYOUT), totals)


def test_unit_totals_are_stored_with_named_columns_and_a_version():
    (data,) = _totals(3).encode(LAYOUT)
    table = pa.ipc.open_stream(data).read_all()
    assert table.schema.metadata[b"tracker.format"] == b"units/2"
    assert table.schema.field("user_id").type == pa.string()
    assert table.schema.field("cell").type == pa.int64()
    assert {"sum:ndcg@10", "sum:r_precision", "sum:hit_rate@5"} <= set(table.column_names)
    # counts equal to the impressions are implied, not stored; the partial column is stored
    assert [n for n in table.column_names if n.startswith("count:")] == ["count:hit_rate@5"]


def test_unit_totals_are_stored_compressed_and_plain_streams_of_before_still_read():
    totals = _totals(2000, seed=3)
    # sums as a day's are: mostly zeros and small multiples of 1/k
    totals = replace(totals, sums=np.asfortranarray(np.floor(totals.sums * 3) / 5))
    (data,) = totals.encode(LAYOUT)
    plain = _rewrite(data, state.UNITS, lambda t: t)  # as written before: no compression
    assert len(data) < len(plain) / 2
    _equal(UnitTotals.decode([plain], LAYOUT), totals)
    _equal(UnitTotals.decode([data], LAYOUT), totals)


def test_units_and_lists_of_before_cells_read_their_arm_as_the_cell():
    """``units/1`` and ``provisional-lists/1`` named the cell ``arm_id`` (the same codes):
    what they stored reads back as written, and other formats still raise."""
    totals = _totals(7, seed=5)
    (data,) = totals.encode(LAYOUT)
    table = state.read(data, state.UNITS)
    old = state.write(table.rename_columns(
        ["arm_id" if n == "cell" else n for n in table.column_names]), "units/1")
    _equal(UnitTotals.decode([old], LAYOUT), totals)
    back = state.read(state.write(table.rename_columns(
        ["arm_id" if n == "cell" else n for n in table.column_names]), "units/1", chunks="2"),
        state.UNITS)
    assert "cell" in back.column_names and "arm_id" not in back.column_names
    assert state.metadata(back, "chunks") == "2"  # its metadata read on too
    with pytest.raises(StaleState, match="units/0"):
        UnitTotals.decode([state.write(table, "units/0")], LAYOUT)


def test_a_reordered_stored_layout_reads_by_name():
    totals = _totals(5)
    (data,) = totals.encode(LAYOUT)
    shuffled = _rewrite(data, state.UNITS,
                        lambda t: t.select(list(reversed(t.column_names))))
    _equal(UnitTotals.decode([shuffled], LAYOUT), totals)


def test_units_written_with_a_metric_since_dropped_read_the_remaining_columns():
    totals = _totals(4)
    smaller = Layout(LAYOUT.columns[1:])
    decoded = UnitTotals.decode(totals.encode(LAYOUT), smaller)
    np.testing.assert_array_equal(decoded.sums, totals.sums[:, 1:])
    np.testing.assert_array_equal(decoded.counts, totals.counts[:, 1:])


@pytest.mark.parametrize("layout, missing", [
    pytest.param(Layout.for_cutoffs([5, 20]), "sum:hit_rate@20", id="a-new-cutoff-asks-for-full"),
    pytest.param(Layout(LAYOUT.columns + (("new_metric", 5),)), "sum:new_metric@5",
                 id="a-new-metric-asks-for-full"),
])
def test_units_lacking_a_column_now_needed_are_refused_with_the_way_out(layout, missing):
    with pytest.raises(StaleState, match=f"{missing}.*tracker rollup --full"):
        UnitTotals.decode(_totals(3).encode(LAYOUT), layout)


@pytest.mark.parametrize("data, found", [
    pytest.param(state.write(pa.table({"user_id": pa.array([], pa.string())}), "units/2"),
                 "units/2", id="a-newer-version-is-refused"),
    pytest.param(state.write(pa.table({"item_id": pa.array([], pa.string())}), "exposure/1"),
                 "exposure/1", id="another-format-is-refused"),
    pytest.param(b'["u1"]' + b"\x00" * 16, None, id="bytes-of-the-old-format-are-refused"),
])
def test_other_formats_and_versions_are_refused_with_the_way_out(data, found):
    with pytest.raises(StaleState, match="tracker rollup --full") as raised:
        UnitTotals.decode([data], LAYOUT)
    if found:
        assert found in str(raised.value)


def test_popularity_reads_back_with_its_number_of_users():
    popularity = Popularity(pa.array(["a", "b"]), np.array([3, 1]), 4)
    back = Popularity.decode(popularity.encode())
    assert (back.items.to_pylist(), back.users.tolist(), back.n_users) == (
        ["a", "b"], [3, 1], 4)


def test_popularity_counted_twice_in_any_order_is_the_same():
    counts = pa.table({"item": ["b", "a", "c"], "users": pa.array([1, 3, 2], pa.int64())})
    one = Popularity.of(counts, 4)
    other = Popularity.of(counts.take([2, 0, 1]), 4)
    assert one.items.to_pylist() == ["a", "b", "c"] and one.users.tolist() == [3, 1, 2]
    assert one.same(other) and one.same(Popularity.decode(one.encode()))
    assert not one.same(Popularity.of(counts, 5))
    assert not one.same(Popularity.of(counts.slice(0, 2), 4))


def test_popularity_of_an_older_format_is_refused():
    data = state.write(pa.table({"item_id": pa.array(["a"]), "users": pa.array([1])}),
                       "popularity/2", n_users="3")
    with pytest.raises(StaleState, match="popularity/2"):
        Popularity.decode(data)


def test_popularity_without_its_number_of_users_is_refused():
    data = state.write(pa.table({"item_id": pa.array(["a"]), "users": pa.array([1])}),
                       state.POPULARITY)
    with pytest.raises(StaleState, match="n_users.*tracker rollup --full"):
        Popularity.decode(data)


def test_exposure_reads_back_at_its_cutoffs_by_name():
    exposure = Exposure(np.array(["a", "b"], dtype=object), np.array([[1, 2], [0, 5]]))
    data = exposure.encode([5, 10])
    back = Exposure.decode(data, [5, 10])
    assert back.items.to_pylist() == ["a", "b"] and back.counts.tolist() == [[1, 2], [0, 5]]
    assert Exposure.decode(data, [10]).counts.tolist() == [[2], [5]]  # a cutoff dropped
    reordered = _rewrite(data, state.EXPOSURE, lambda t: t.select(["top@10", "item_id",
                                                                   "top@5"]))
    assert Exposure.decode(reordered, [5, 10]).counts.tolist() == [[1, 2], [0, 5]]


def test_exposure_lacking_a_new_cutoff_is_refused_with_the_way_out():
    data = Exposure(np.array(["a"], dtype=object), np.array([[1]])).encode([5])
    with pytest.raises(StaleState, match="top@20.*tracker rollup --full"):
        Exposure.decode(data, [5, 20])


def test_the_catalog_row_has_items_and_no_counts():
    catalog = Exposure(np.array(["a", "b"], dtype=object), np.zeros((2, 0), dtype=np.int64))
    back = Exposure.decode(catalog.encode([]), [])
    assert back.items.to_pylist() == ["a", "b"] and back.counts.shape == (2, 0)


def _logs(seed: int, start, tag: str):
    imps, events = make_logs(seed, days=1, start=start)
    for record in imps + events:
        for key in ("impression_id", "event_id"):
            if key in record:
                record[key] = f"{record[key]}-{tag}"
    return imps, events


def _drop_stored_column(engine: sa.Engine, name: str) -> None:
    """Rewrite every stored unit part and the checkpoint's users without ``name``: state as
    a release that did not yet compute that metric would have left it."""
    with engine.begin() as conn:
        for experiment_id, columns in conn.execute(sa.text(
                "SELECT experiment_id, columns FROM rollup_checkpoint")).all():
            described = json.loads(columns)
            columns = described["columns"]
            j = columns.index(name[len("sum:"):])
            users = conn.execute(sa.text(
                "SELECT user_id, data FROM rollup_user_totals WHERE experiment_id = :e "
                "ORDER BY user_id"), {"e": experiment_id}).all()
            rows = decode_users([(u, unpack(bytes(d))) for u, d in users], len(columns))
            less = UnitTotals(rows.users, rows.cells, rows.impressions,
                              np.delete(rows.sums, j, axis=1), np.delete(rows.counts, j, axis=1))
            for user, data in encode_users(less):
                conn.execute(sa.text("UPDATE rollup_user_totals SET data = :d WHERE "
                                     "experiment_id = :e AND user_id = :u"),
                             {"d": pack(data), "e": experiment_id, "u": user})
            conn.execute(sa.text("UPDATE rollup_checkpoint SET columns = :c, sums = NULL "
                                 "WHERE experiment_id = :e"),
                         {"c": json.dumps({**described, "columns": columns[:j] + columns[j + 1:]}),
                          "e": experiment_id})
        rows = conn.execute(sa.text(
            "SELECT experiment_id, day, cumulative, part, data FROM rollup_units")).all()
        for *key, data in rows:
            smaller = _rewrite(bytes(data), state.UNITS, lambda t: t.drop_columns([name]))
            conn.execute(sa.text(
                "UPDATE rollup_units SET data = :data WHERE experiment_id = :e AND day = :d "
                "AND cumulative = :c AND part = :p"),
                dict(data=smaller, e=key[0], d=key[1], c=key[2], p=key[3]))


def test_a_run_over_state_without_a_metric_now_computed_asks_for_full_and_full_repairs(
        tracker):
    create(tracker)
    for seed, start, tag in ((1, T0, "a"), (2, T0 + timedelta(days=3), "b")):
        imps, events = _logs(seed, start, tag)
        tracker.log_impressions(imps, on_invalid="all_or_nothing")
        tracker.log_interactions(events, on_invalid="all_or_nothing")
        if tag == "a":
            tracker.rollup("home", now=NOW)
            before = tracker.metric_table("home", cumulative=True)
            _drop_stored_column(tracker.engine, "sum:ndcg@5")
    with pytest.raises(StaleState, match="sum:ndcg@5.*tracker rollup --full"):
        tracker.rollup("home", now=NOW)
    assert tracker.metric_table("home", cumulative=True).equals(before)  # nothing lost
    tracker.rollup("home", full=True, now=NOW)
    after = tracker.metric_table("home", cumulative=True)
    assert set(after["day"]) > set(before["day"])  # the second batch's days are in


def test_a_compressed_stream_reads_back_the_same_table_and_is_smaller():
    codes = np.random.default_rng(3).integers(0, 500, 200_000).astype(np.int32)
    table = pa.table({"code": codes, "flag": np.zeros(codes.size, dtype=np.int8)})
    plain = state.write(table, state.EXPOSURE, chunks="1")
    packed = state.write(table, state.EXPOSURE, compress=True, chunks="1")
    assert len(packed) < len(plain) / 2
    for data in (plain, packed):  # a reader takes either: older plain streams still read
        back = state.read(data, state.EXPOSURE)
        assert back.equals(table.replace_schema_metadata(back.schema.metadata))
        assert state.metadata(back, "chunks") == "1"


def _cumulative_unit_days(engine) -> list:
    """The days of the stored checkpoints (and of cumulative unit blobs: none now)."""
    with engine.connect() as conn:
        return [d if not isinstance(d, str) else date.fromisoformat(d) for (d,) in conn.execute(
            sa.text("SELECT day FROM rollup_checkpoint UNION ALL "
                    "SELECT DISTINCT day FROM rollup_units WHERE cumulative ORDER BY day"))]


def _newest_final_day(engine):
    """The newest day through which every day was computed after its windows closed."""
    with engine.connect() as conn:
        days = conn.execute(sa.text(
            "SELECT day, closes_at, computed_at FROM rollup_day ORDER BY day")).all()
    final = None
    for day, closes, computed in days:
        if computed < closes:
            break
        final = day if not isinstance(day, str) else date.fromisoformat(day)
    return final, len(days)


def test_one_cumulative_checkpoint_is_kept_at_the_newest_final_day(tracker):
    create(tracker)
    imps, events = make_logs(12, days=5)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    last = max(r["served_at"] for r in imps)
    tracker.rollup("home", now=last + timedelta(minutes=1))  # the last days' windows open
    final, days = _newest_final_day(tracker.engine)
    assert final is not None and final < max(r["served_at"].date() for r in imps)
    assert _cumulative_unit_days(tracker.engine) == [final]  # not one per day
    incremental = {c: tracker.metric_table("home", cumulative=c) for c in (False, True)}
    tracker.rollup("home", now=NOW)  # every window closed: the checkpoint moves on
    assert _cumulative_unit_days(tracker.engine) == [_newest_final_day(tracker.engine)[0]]
    assert _newest_final_day(tracker.engine) == (max(r["served_at"].date() for r in imps),
                                                 days)
    rebuilt = {c: tracker.metric_table("home", cumulative=c) for c in (False, True)}
    tracker.rollup("home", full=True, now=NOW)
    for c in (False, True):
        assert tracker.metric_table("home", cumulative=c).equals(rebuilt[c])
    assert not incremental[True].equals(rebuilt[True])  # the late window answers counted
