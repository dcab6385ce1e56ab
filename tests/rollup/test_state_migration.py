"""Migration 0006 (the rollup state's generation): upgrade keeps the watermarks, downgrade
turns a reset state back into what it meant before (no row: rebuild) and keeps the rest."""

from __future__ import annotations

import sqlalchemy as sa

from tests.rollup.scenario import create
from tracker import Tracker
from tracker.store import schema
from tracker.store.db import create_engine


def _states(engine: sa.Engine) -> list[tuple]:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT experiment_id, impressions_seen, interactions_seen FROM rollup_state "
            "ORDER BY experiment_id")).all()


def test_0006_keeps_watermarks_both_ways_and_a_reset_downgrades_to_no_row(empty_url):
    engine = create_engine(empty_url)
    schema.upgrade(engine, "0005")
    with engine.begin() as conn:  # plain SQL at 0005: the code expects the later schema
        conn.execute(sa.text(
            "INSERT INTO experiment (id, key, name, description, status, control_arm, "
            "attribution_window_us, unknown_events, timezone, cutoffs, created_at) VALUES "
            "(1000, 'old', 'old', '', 'running', 'a', 3600000000, 'reject', 'UTC', '[5]', 0)"))
        conn.execute(sa.text("INSERT INTO rollup_state (experiment_id, impressions_seen, "
                             "interactions_seen, updated_at) VALUES (1000, 7, 9, 0)"))
    schema.upgrade(engine)
    with Tracker(empty_url) as t:
        create(t, key="declared")
        t.declare_catalog("declared", ["i1"])  # a reset row: watermarks NULL, generation 1
        declared = t.experiment("declared").id
        with t.engine.connect() as conn:
            generations = dict(conn.execute(sa.text(
                "SELECT experiment_id, generation FROM rollup_state")).all())
    assert sorted(_states(engine)) == sorted([(1000, 7, 9), (declared, None, None)])
    assert generations == {1000: 0, declared: 1}
    schema.downgrade(engine, "0005")
    assert _states(engine) == [(1000, 7, 9)]
    schema.upgrade(engine)
    assert _states(engine) == [(1000, 7, 9)]
    engine.dispose()
