"""The cumulative pass's checkpoint keyed by user (tracker.rollup.cumulative, stores,
migration 0021): the cumulative rows a night moves by its users' deltas equal, bit for bit,
a pass from the first day over the same daily rows; a night reads and writes only the users
its days hold; an upgraded checkpoint (one stream of every user) becomes one row per user
and goes back bit for bit."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta

import numpy as np
import pytest
import sqlalchemy as sa

from tests.rollup.scenario import assert_same_tables, create, dump, make_logs
from tracker import Tracker
from tracker.errors import StaleState
from tracker.rollup import stores
from tracker.rollup.aggregate import UnitTotals
from tracker.rollup.covariates import names_for
from tracker.rollup.cumulative import cumulative_from
from tracker.rollup.deltas import ViewSums
from tracker.rollup.outcomes import Layout
from tracker.rollup.stored_covariates import Stored
from tracker.rollup.user_covariates import UserCovariates
from tracker.store import schema
from tracker.store.db import create_engine, transaction
from tracker.store.experiments import get_experiment
from tracker.store.rollup_tables import CROSSOVER
from tracker.store.types import to_micros

START = datetime(2026, 11, 2, tzinfo=UTC)
DAYS = 6
RETURNING = {"u0", "u1", "u2"}  # users served every day; the others on one day only


def _logs(seed: int) -> tuple[list[dict], list[dict]]:
    """``DAYS`` days of lists, each day's users new but for :data:`RETURNING`, with history
    before the first day (CUPED's pre-period)."""
    imps, events = [], []
    for day in range(DAYS):
        tag = f"d{day}"
        more, answers = make_logs(seed + day, days=1, users=12, impressions=50,
                                  start=START + timedelta(days=day),
                                  history=30 if day == 0 else 0)

        def user(u: str, tag: str = tag) -> str:
            return u if u in RETURNING or u.startswith("x") else f"{u}-{tag}"

        imps += [{**r, "impression_id": f"{r['impression_id']}-{tag}",
                  "user_id": user(r["user_id"])} for r in more]
        events += [{**r, "event_id": f"{r['event_id']}-{tag}", "user_id": user(r["user_id"]),
                    **({"impression_id": f"{r['impression_id']}-{tag}"}
                       if "impression_id" in r else {})} for r in answers]
    return imps, events


def _nightly(tracker: Tracker, imps: list[dict], events: list[dict], each=None) -> datetime:
    """Log and roll up night by night, 30 minutes after each day ends; returns the last
    clock. ``each(night)`` runs before each night's rollup."""
    logged_imps, logged_events = set(), set()
    clock = START
    for day in range(DAYS):
        end = datetime.combine((START + timedelta(days=day)).date() + timedelta(days=1),
                               time(), UTC)
        new = [r for r in imps if r["served_at"] < end and r["impression_id"] not in
               logged_imps]
        answers = [r for r in events if r["occurred_at"] < end and r["event_id"] not in
                   logged_events]
        tracker.log_impressions(new, on_invalid="all_or_nothing")
        tracker.log_interactions(answers, on_invalid="all_or_nothing")
        logged_imps |= {r["impression_id"] for r in new}
        logged_events |= {r["event_id"] for r in answers}
        clock = end + timedelta(minutes=30)
        if each is not None:
            each(day)
        tracker.rollup("home", now=clock)
    return clock


CUMULATIVE = ("rollup_metric", "rollup_health", "rollup_covariate_sums")


def _cumulative(engine: sa.Engine) -> dict:
    found = dump(engine)
    out = {t: [row for row in found[t] if dict(row)["cumulative"]] for t in CUMULATIVE}
    with engine.connect() as conn:
        out["checkpoint"] = conn.execute(sa.text(
            "SELECT day, columns, sums FROM rollup_checkpoint")).all()
        out["users"] = conn.execute(sa.text(
            "SELECT user_id, data FROM rollup_user_totals ORDER BY user_id")).all()
    return out


@pytest.mark.parametrize("seed", [1, 7, 19])
def test_cumulative_rows_moved_by_deltas_equal_a_pass_from_the_first_day_bit_for_bit(
        tracker, seed):
    create(tracker)
    imps, events = _logs(seed)
    clock = _nightly(tracker, imps, events)
    incremental = _cumulative(tracker.engine)
    assert incremental["checkpoint"] and incremental["rollup_covariate_sums"]
    with transaction(tracker.engine, write=True) as conn:
        info = get_experiment(conn, "home")
        covariates = Stored.open(conn, info, names_for(info.cutoffs)).subset(None)
        first = min(r["served_at"] for r in imps).date()
        cumulative_from(conn, info, first, to_micros(clock), covariates=covariates,
                        restart=True)
    rebuilt = _cumulative(tracker.engine)
    for table in incremental:  # exactly: no tolerance
        assert rebuilt[table] == incremental[table], table


def test_a_night_reads_and_writes_only_the_users_its_days_hold(tracker, monkeypatch):
    create(tracker)
    imps, events = _logs(3)
    asked, written = [], []
    read, write = stores.DatabaseStore.checkpoint_rows, stores.DatabaseStore.write_checkpoint
    monkeypatch.setattr(stores.DatabaseStore, "checkpoint_rows", lambda self, users: (
        asked[-1].append(None if users is None else set(users.to_pylist())),
        read(self, users))[1])
    monkeypatch.setattr(stores.DatabaseStore, "write_checkpoint",
                        lambda self, day, sums, rows, everyone: (
                            written[-1].append((day, set(rows.users.to_pylist()), everyone)),
                            write(self, day, sums, rows, everyone))[1])

    def night(day: int) -> None:
        asked.append([])
        written.append([])

    _nightly(tracker, imps, events, each=night)
    users_of = {}
    for r in imps:
        users_of.setdefault(r["served_at"].date(), set()).add(r["user_id"])
    days = sorted(users_of)
    # night n (from the third on): the checkpoint moves from day n-2 to day n-1, the users
    # read are those of days n-1 and n, the users written those of day n-1 alone
    for n in range(2, DAYS):
        assert all(found is not None for found in asked[n]), n  # never every user
        read_users = set().union(*asked[n])
        assert read_users <= users_of[days[n - 1]] | users_of[days[n]], n
        assert users_of[days[n - 1]] - read_users <= users_of[days[n - 1]] - \
            set().union(*(users_of[d] for d in days[:n - 1])), n  # only new ones unread
        ((day, users, everyone),) = written[n]
        assert day == days[n - 1] and users == users_of[days[n - 1]] and not everyone
    seen_once = set().union(*(users_of[d] for d in days[:2])) - RETURNING
    assert not seen_once & set().union(*asked[-1])  # the first days' users: never again


def _first_four_days(url: str) -> tuple[sa.Engine, list[dict], list[dict], datetime]:
    """A database at this release's schema holding the first four days of ``_logs(5)``
    (and every interaction) rolled up: its engine, every list, the lists logged, the clock."""
    engine = create_engine(url)
    schema.upgrade(engine)
    with Tracker(url) as t:
        create(t)
        imps, events = _logs(5)
        early = [r for r in imps if r["served_at"] < START + timedelta(days=4)]
        t.log_impressions(early, on_invalid="all_or_nothing")
        t.log_interactions(events, on_invalid="all_or_nothing")
        clock = START + timedelta(days=10)
        t.rollup("home", now=clock)
    return engine, imps, early, clock


def test_0021_turns_the_checkpoint_into_a_row_per_user_and_back_bit_for_bit(empty_url):
    engine, imps, early, clock = _first_four_days(empty_url)
    before = _cumulative(engine)
    ((day, columns, _),) = before["checkpoint"]
    with engine.connect() as conn:
        info = get_experiment(conn, "home")
        covariates = Stored.open(conn, info, names_for(info.cutoffs)).subset(None)
        rows_before = conn.execute(sa.text("SELECT * FROM rollup_user_covariates "
                                           "ORDER BY user_id")).all()
    assert len(covariates.users) > 10
    schema.downgrade(engine, "0020")  # one cumulative units stream on the checkpoint's day
    with engine.connect() as conn:
        layout = Layout.for_cutoffs(list(info.cutoffs))
        parts = conn.execute(sa.text(
            "SELECT day, data FROM rollup_units WHERE cumulative ORDER BY part")).all()
        stream = conn.execute(sa.text("SELECT data FROM rollup_user_covariates")).scalar_one()
    # CUPED's covariates: one covariates/3 stream again, every value kept
    back = UserCovariates.decode(bytes(stream), info.cuped_days, covariates.names)
    assert back.users.to_pylist() == covariates.users.to_pylist()
    assert np.array_equal(back.x, covariates.x) and np.array_equal(back.first, covariates.first)
    assert {str(d)[:10] for d, _ in parts} == {str(day)[:10]}
    stream = UnitTotals.decode([bytes(data) for _, data in parts], layout)
    rows = stores.decode_users([(u, stores.unpack(bytes(d))) for u, d in before["users"]],
                               len(layout))
    assert stream.users.to_pylist() == rows.users.to_pylist()
    for name in ("cells", "impressions", "sums", "counts"):
        assert np.array_equal(getattr(stream, name), getattr(rows, name)), name
    schema.upgrade(engine)  # back to rows, the sums to compute once
    after = _cumulative(engine)
    assert after["users"] == before["users"]
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT * FROM rollup_user_covariates "
                                    "ORDER BY user_id")).all() == rows_before
    assert [(d, c, s) for d, c, s in after["checkpoint"]] == [(day, columns, None)]
    with Tracker(empty_url) as t:
        t.log_impressions([r for r in imps if r not in early], on_invalid="all_or_nothing")
        t.rollup("home", now=clock)
        incremental = _cumulative(engine)
        t.rollup("home", full=True, now=clock)
    assert incremental["checkpoint"][0][2] is not None  # computed once, then kept
    rebuilt = _cumulative(engine)
    # to the last bits: a day recomputed in part sums a user's values in another order
    assert_same_tables({t: rebuilt[t] for t in CUMULATIVE},
                       {t: incremental[t] for t in CUMULATIVE})
    engine.dispose()


def _stored_sums_equal_their_users(engine: sa.Engine) -> None:
    """The checkpoint's exact sums are those of its users' stored totals and covariates."""
    with engine.connect() as conn:
        info = get_experiment(conn, "home")
        layout = Layout.for_cutoffs(list(info.cutoffs))
        store = stores.DatabaseStore(conn, info)
        found = store.checkpoint()
        rows = store.checkpoint_rows(None)
        covariates = Stored.open(conn, info, names_for(info.cutoffs)).subset(None)
    rebuilt = ViewSums(layout, cuped=True)
    rebuilt.move(UnitTotals.empty(len(layout)), rows, covariates)
    assert found.sums == rebuilt.encode()


def test_after_expiry_a_late_pre_period_row_moves_the_checkpoints_sums_only(tracker):
    """Expired logs took the daily rows a pass from the first day would read: a late row in
    the pre-period of a user exposed after the horizon changes that user's covariates and
    the checkpoint's CUPED sums (exactly those of its users' rows and covariates), and
    leaves every cumulative metric and health row and every user's totals as they were."""
    create(tracker, cuped_days=1)
    imps, events = make_logs(3, days=6, history=20, users=30, impressions=150)
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events, on_invalid="all_or_nothing")
    now = max(r["served_at"] for r in imps) + timedelta(days=3)
    tracker.rollup("home", now=now)
    _stored_sums_equal_their_users(tracker.engine)
    start = min(r["served_at"] for r in imps)
    tracker.expire_logs(now - (start + timedelta(days=2)), now=now)
    before = _cumulative(tracker.engine)
    first: dict[str, datetime] = {}
    for r in imps:
        first[r["user_id"]] = min(first.get(r["user_id"], r["served_at"]), r["served_at"])
    user, at = max(first.items(), key=lambda kv: kv[1])  # exposed after the horizon
    tracker.log_interactions([{"event_id": "late-pre", "user_id": user, "item_id": "i1",
                               "event": "click", "occurred_at": at - timedelta(hours=2)}])
    tracker.rollup("home", now=now)
    after = _cumulative(tracker.engine)
    for table in ("rollup_metric", "rollup_health", "users"):
        assert after[table] == before[table], table
    assert after["checkpoint"][0][2] != before["checkpoint"][0][2]  # the sums moved
    _stored_sums_equal_their_users(tracker.engine)


def test_0021_reads_a_checkpoint_in_parts_whose_counts_are_left_out_in_some():
    """The release before left out a part's ``count:`` column when every count of that part
    equals its impressions: each part's counts are filled from its own impressions."""
    import importlib.util
    from pathlib import Path

    import pyarrow as pa

    path = Path(__file__).resolve().parents[2] / "migrations/versions/0021_user_checkpoint.py"
    spec = importlib.util.spec_from_file_location("migration_0021", path)
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)

    def part(users: list[str], counts: list[float] | None) -> bytes:
        data = {"user_id": pa.array(users), "cell": pa.array([1] * len(users), pa.int64()),
                "impressions": pa.array([2] * len(users), pa.int64()),
                "sum:ndcg@5": pa.array([1.0] * len(users))}
        if counts is not None:
            data["count:ndcg@5"] = pa.array(counts)
        table = pa.table(data).replace_schema_metadata({b"tracker.format": b"units/2"})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue().to_pybytes()

    table = migration._units([part(["a"], [1.0]), part(["b"], None)])
    assert table["count:ndcg@5"].to_pylist() == [1.0, 2.0]


def test_a_checkpoint_with_a_column_dropped_since_is_rewritten_whole_in_this_layout(tracker):
    """Rows stored with a column this release no longer computes are read by name; the next
    checkpoint the pass stores rewrites every user's rows in this layout, not only the users
    that moved (rows of two layouts could not be read)."""
    create(tracker)
    imps, events = _logs(11)
    widened = []

    def widen(night: int) -> None:
        if night != 3:
            return
        with tracker.engine.begin() as conn:
            described = json.loads(conn.execute(sa.text(
                "SELECT columns FROM rollup_checkpoint")).scalar_one())
            names = described["columns"]
            for user, data in conn.execute(sa.text(
                    "SELECT user_id, data FROM rollup_user_totals")).all():
                rows = stores.decode_users([(user, stores.unpack(bytes(data)))], len(names))
                wider = UnitTotals(rows.users, rows.cells, rows.impressions,
                                   np.asfortranarray(np.c_[rows.sums, np.ones(rows.size)]),
                                   np.asfortranarray(np.c_[rows.counts, np.ones(rows.size)]))
                ((_, data),) = stores.encode_users(wider)
                conn.execute(sa.text("UPDATE rollup_user_totals SET data = :d WHERE "
                                     "user_id = :u"), {"d": stores.pack(data), "u": user})
            conn.execute(sa.text("UPDATE rollup_checkpoint SET columns = :c"), {"c": json.dumps(
                {**described, "columns": names + ["dropped@5"]})})
            widened.append(len(names))

    _nightly(tracker, imps, events, each=widen)
    assert widened
    with tracker.engine.connect() as conn:
        described = json.loads(conn.execute(sa.text(
            "SELECT columns FROM rollup_checkpoint")).scalar_one())
        rows = conn.execute(sa.text("SELECT user_id, data FROM rollup_user_totals")).all()
    assert len(described["columns"]) == widened[0]
    stores.decode_users(sorted((u, stores.unpack(bytes(d))) for u, d in rows),
                        widened[0])  # every row
    _stored_sums_equal_their_users(tracker.engine)


def _without_crossover(found: dict) -> dict:
    """:func:`_cumulative`'s tables as migration 0027's downgrade leaves them: no crossover
    rows, the checkpoint's sums forgotten."""
    out = {t: [row for row in rows if dict(row)["segment"] != CROSSOVER]
           for t, rows in found.items() if t in CUMULATIVE}
    out["checkpoint"] = [(day, columns, None) for day, columns, _ in found["checkpoint"]]
    return {**found, **out}


def test_0026_compresses_the_users_rows_and_back_bit_for_bit(empty_url):
    """Migration 0026: the checkpoint's users' rows become plain records (user-totals/1) on
    downgrade and the same compressed rows again on upgrade, and the next nights go on from
    them as if nothing happened (their cumulative rows: a pass from the first day's)."""
    engine, imps, early, clock = _first_four_days(empty_url)
    before = _cumulative(engine)
    assert json.loads(before["checkpoint"][0][1])["format"] == stores.USER_TOTALS
    schema.downgrade(engine, "0025")
    plain = _cumulative(engine)
    assert json.loads(plain["checkpoint"][0][1])["format"] == "user-totals/1"
    assert [u for u, _ in plain["users"]] == [u for u, _ in before["users"]]
    for (_, packed), (_, records) in zip(before["users"], plain["users"], strict=True):
        assert stores.unpack(bytes(packed)) == bytes(records)   # plain records, the same
    schema.upgrade(engine)
    # 0027 went down and up too: the crossover rows and the sums are gone, to compute again
    assert _cumulative(engine) == _without_crossover(before)
    with Tracker(empty_url) as t:
        t.log_impressions([r for r in imps if r not in early], on_invalid="all_or_nothing")
        t.rollup("home", now=clock)
        incremental = _cumulative(engine)
        t.rollup("home", full=True, now=clock)
    rebuilt = _cumulative(engine)
    assert_same_tables({t: rebuilt[t] for t in CUMULATIVE},
                       {t: incremental[t] for t in CUMULATIVE})


@pytest.mark.parametrize("data", [b"\x05\x00\x00\x00\x00\x00\x00\x00not lz4",
                                  b"not user totals", b"", stores.pack(b"x" * 999)[:-3]])
def test_a_stored_total_that_is_no_compressed_record_asks_for_full(data):
    with pytest.raises(StaleState, match="rollup --full"):
        stores.unpack(data)
