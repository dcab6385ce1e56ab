"""Small builders shared by tests (plain functions, no magic)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def make_experiment(tracker, key: str = "home", **overrides):
    options = dict(arms={"control": 0.5, "treatment": 0.5}, control="control",
                   attribution_window=timedelta(hours=24),
                   relevance={"click": 1, "play": 1, "save": 2, "purchase": 3})
    options.update(overrides)
    return tracker.create_experiment(key, **options)


def impression(i: int = 0, **overrides) -> dict:
    record = {"impression_id": f"imp-{i}", "experiment": "home", "arm": "control",
              "user_id": f"u{i % 7}", "items": [f"item-{i}-{j}" for j in range(5)],
              "scores": [1.0 - j / 10 for j in range(5)], "served_at": T0 + timedelta(seconds=i)}
    record.update(overrides)
    return record


def interaction(i: int = 0, **overrides) -> dict:
    record = {"event_id": f"evt-{i}", "user_id": f"u{i % 7}", "item_id": f"item-{i}-0",
              "event": "click", "occurred_at": T0 + timedelta(seconds=i + 30)}
    record.update(overrides)
    return record


def count(engine: sa.Engine, table: str) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


def stored_impressions(engine: sa.Engine) -> dict[str, dict]:
    """Stored impressions by key, read back through Core (independent of the write path)."""
    from tracker.store.models import Impression

    with engine.connect() as conn:
        rows = conn.execute(sa.select(Impression.__table__)).mappings().all()
    return {row["impression_key"]: dict(row) for row in rows}


def insert_plain_experiment(conn: sa.Connection, experiment_id: int, *, arms: bool = False
                            ) -> None:
    """Experiment ``old`` (with ``arms``: its arms a and b) in plain SQL, valid at every schema
    revision: migration tests must not use code that expects the head."""
    conn.execute(sa.text(
        "INSERT INTO experiment (id, key, name, description, status, control_arm, "
        "attribution_window_us, unknown_events, timezone, cutoffs, created_at) VALUES "
        "(:id, 'old', 'old', '', 'running', 'a', 3600000000, 'reject', 'UTC', '[5]', 0)"),
        {"id": experiment_id})
    if arms:
        conn.execute(sa.text("INSERT INTO arm (id, experiment_id, key, weight) VALUES "
                             "(1, :id, 'a', 1), (2, :id, 'b', 1)"), {"id": experiment_id})
