"""Random but realistic small logs for rollup tests (plain Python, seeded)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import sqlalchemy as sa

from tests.helpers import T0

RELEVANCE = {"click": 1, "play": 1, "save": 2, "purchase": 3, "view": 0}
WINDOW = timedelta(hours=6)
CUTOFFS = (2, 3, 5)


def make_logs(seed: int, *, days: int = 3, users: int = 12, impressions: int = 60,
              start: datetime = T0, key: str = "home", history: int = 0
              ) -> tuple[list[dict], list[dict]]:
    """Impressions (some with baselines) and interactions: window hits, late events past the
    window, explicit impression keys, grade-0 views, repeated items, crossover users; and
    ``history`` interactions in the 3 days before the day before ``start`` (the
    experiment's users' and others': surprisal's reference period, CUPED's pre-period)."""
    rng = random.Random(seed)
    catalog = [f"i{n}" for n in range(25)]
    imps, events = [], []
    for n in range(impressions):
        user = f"u{rng.randrange(users)}"
        arm = "control" if int(user[1:]) % 2 == 0 else "treatment"
        if rng.random() < 0.05:
            arm = "treatment" if arm == "control" else "control"  # a crossover exposure
        served = start + timedelta(seconds=rng.randrange(days * 86_400))
        items = rng.sample(catalog, rng.randint(1, 7))
        record = {"impression_id": f"{key}-imp-{n}", "experiment": key, "arm": arm,
                  "user_id": user, "items": items, "served_at": served}
        if rng.random() < 0.6:
            record["baseline_items"] = rng.sample(catalog, rng.randint(1, 7))
        imps.append(record)
        for e in range(rng.choice([0, 0, 1, 2, 3])):
            item = rng.choice(items) if rng.random() < 0.7 else rng.choice(catalog)
            delay = timedelta(minutes=rng.choice([1, 30, 200, 359, 361, 900]))
            event = {"event_id": f"{key}-evt-{n}-{e}", "user_id": user, "item_id": item,
                     "event": rng.choice(list(RELEVANCE)), "occurred_at": served + delay}
            if rng.random() < 0.1:
                event["impression_id"] = record["impression_id"]
            events.append(event)
    return imps, events + _history(seed, history, users, start, catalog, key)


def crossed_logs(seed: int) -> tuple[list[dict], list[dict]]:
    """:func:`make_logs`' lists over 4 days with a third of the users served both arms (on
    random lists): the crossover cells' scenario."""
    imps, events = make_logs(seed, days=4, users=16, impressions=110, history=10)
    for n, imp in enumerate(imps):
        if int(imp["user_id"][1:]) % 3 == 0 and n % 4 == 0:
            imp["arm"] = "treatment" if imp["arm"] == "control" else "control"
    return imps, events


def _history(seed: int, count: int, users: int, start: datetime, catalog: list[str],
             key: str) -> list[dict]:
    """``count`` interactions before ``start`` (their own random stream: the rest of the
    logs do not depend on it), a quarter of them by users the experiment never serves."""
    rng = random.Random(seed + 1_000_003)
    # before the day of ``start`` begins in any time zone: none on the experiment's first day
    before = start.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    return [{"event_id": f"{key}-hist-{n}",
             "user_id": f"u{rng.randrange(users)}" if rng.random() < 0.75 else f"x{n % 5}",
             "item_id": rng.choice(catalog[:12]), "event": rng.choice(list(RELEVANCE)),
             "occurred_at": before - timedelta(seconds=rng.randrange(3 * 86_400))}
            for n in range(count)]


def create(tracker, key: str = "home", **overrides) -> None:
    options = dict(arms={"control": 0.5, "treatment": 0.5}, control="control",
                   attribution_window=WINDOW, relevance=RELEVANCE, cutoffs=CUTOFFS)
    options.update(overrides)
    tracker.create_experiment(key, **options)


ROLLUP_TABLES = {
    "rollup_metric": "experiment_id, day, cumulative, arm_id, segment, slice, metric, k",
    "rollup_health": "experiment_id, day, cumulative, arm_id, segment, slice",
    "rollup_units": "experiment_id, day, cumulative, part",
    "rollup_exposure": "experiment_id, day, cumulative, arm_id, segment, slice",
    "rollup_user_covariates": "experiment_id, user_id",
    "rollup_covariate_sums": "experiment_id, day, cumulative, arm_id, segment, slice, "
                             "metric, k",
    "rollup_day": "experiment_id, day",
    "rollup_first_seen": "experiment_id, day",
    "rollup_popularity": "experiment_id, day",
    "rollup_exposure_day": "experiment_id, day, exposure_day, arm_id, segment, slice, "
                           "metric, k",
    "rollup_slice_count": "experiment_id, day, segment, slice",
}


SKIP = ("computed_at", "id")


def dump(engine: sa.Engine, without: tuple[str, ...] = ()) -> dict[str, list[tuple]]:
    """Every rollup table's rows (but those ``without``) in key order, without computation
    times and surrogate ids."""
    out = {}
    with engine.connect() as conn:
        present = set(sa.inspect(conn).get_table_names())  # older revisions lack some
        for table, order in ROLLUP_TABLES.items():
            if table in without or table not in present:
                continue
            columns = {c["name"] for c in sa.inspect(conn).get_columns(table)}
            order = ", ".join(c for c in order.split(", ") if c in columns)  # older revisions
            rows = conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY {order}")).mappings()
            out[table] = [tuple((k, v) for k, v in sorted(row.items()) if k not in SKIP)
                          for row in rows]
    return out


def assert_same_tables(found: dict[str, list[tuple]], expected: dict[str, list[tuple]],
                       rel: float = 1e-12) -> None:
    """Two :func:`dump`\\ s hold the same rows: every key and integer equal, floats equal up
    to ``rel`` (a day scored in part sums a user's values in another order than a whole
    day: the last bits may differ), stored Arrow streams compared column by column so."""
    assert found.keys() == expected.keys()
    for table, rows in expected.items():
        assert len(found[table]) == len(rows), table
        for got, want in zip(found[table], rows, strict=True):
            assert [k for k, _ in got] == [k for k, _ in want], table
            assert [_comparable(v, rel) for _, v in got] == \
                [_comparable(v, rel) for _, v in want], (table, want)


def _comparable(value, rel: float):
    """``value`` as :func:`assert_same_tables` compares it."""
    import pyarrow as pa
    import pytest

    if isinstance(value, float):
        return pytest.approx(value, rel=rel, abs=rel)
    if isinstance(value, bytes | memoryview):
        try:
            table = pa.ipc.open_stream(pa.py_buffer(value)).read_all()
        except (pa.ArrowInvalid, OSError):
            return bytes(value)
        return (table.schema.metadata,
                [(name, [_comparable(v, rel) for v in table[name].to_pylist()])
                 for name in table.column_names])
    return value
