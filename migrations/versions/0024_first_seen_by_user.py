"""``rollup_first_seen`` keyed by user: one row per user of an experiment, the day of the
user's first unit row, instead of one Arrow stream per day of the users first seen on it.

The exposure-day view needs each user's first day. Each run read every day's stream and
matched its days' users against every user seen since the start, so the nightly cost grew
with the history; now a run looks up the first days of the users its days hold, by key.

Upgrade: every ``first_seen/1`` stream becomes its users' rows, each with the stream's day.
An experiment whose streams do not cover every one of its rolled-up days (a day computed
before revision 0012, or a stream in another format) loses its exposure-day rows instead:
the next run that touches it rebuilds them, and its users' first days, from the stored
daily units of its first day on, as the release before did for such an experiment.
Downgrade: one stream per rolled-up day again (empty for a day that saw no new user), as
revision 0023 reads them.

Spelled out here, not imported: a migration describes its own revision's formats.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-29
"""

from __future__ import annotations

from datetime import date

import pyarrow as pa
import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

FORMAT = b"tracker.format"
FIRST_SEEN = b"first_seen/1"
BATCH = 10_000


def _users(data: bytes) -> list[str] | None:
    """The users of one stream (None: not a ``first_seen/1`` stream)."""
    try:
        table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    except (pa.ArrowInvalid, OSError):
        return None
    if (table.schema.metadata or {}).get(FORMAT) != FIRST_SEEN or \
            "user_id" not in table.column_names:
        return None
    return table["user_id"].cast(pa.string()).to_pylist()


def _days(conn: sa.Connection) -> dict[int, set]:
    out: dict[int, set] = {}
    for experiment, day in conn.execute(sa.text("SELECT experiment_id, day FROM rollup_day")):
        out.setdefault(int(experiment), set()).add(str(day)[:10])
    return out


def _insert(conn: sa.Connection, table: sa.Table, rows: list[dict]) -> None:
    for at in range(0, len(rows), BATCH):
        conn.execute(table.insert(), rows[at:at + BATCH])


def upgrade() -> None:
    conn = op.get_bind()
    streams: dict[int, dict] = {}
    for experiment, day, data in conn.execute(sa.text(
            "SELECT experiment_id, day, data FROM rollup_first_seen")):
        streams.setdefault(int(experiment), {})[str(day)[:10]] = _users(bytes(data))
    op.drop_table("rollup_first_seen")
    table = op.create_table(
        "rollup_first_seen",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "user_id", name=op.f("pk_rollup_first_seen")),
    )
    op.create_index(op.f("ix_rollup_first_seen_experiment_id_day"), "rollup_first_seen",
                    ["experiment_id", "day"])
    rows = []
    for experiment, days in _days(conn).items():
        found = streams.get(experiment, {})
        if any(found.get(day) is None for day in days):  # rebuilt by the next run
            conn.execute(sa.text("DELETE FROM rollup_exposure_day WHERE experiment_id = :e"),
                         {"e": experiment})
            continue
        first: dict[str, str] = {}
        for day in sorted(days):
            for user in found[day]:
                first.setdefault(user, day)
        rows += [{"experiment_id": experiment, "user_id": user,
                  "day": date.fromisoformat(day)} for user, day in first.items()]
    _insert(conn, table, rows)


def downgrade() -> None:
    conn = op.get_bind()
    firsts: dict[int, dict[str, list[str]]] = {}
    for experiment, user, day in conn.execute(sa.text(
            "SELECT experiment_id, user_id, day FROM rollup_first_seen")):
        firsts.setdefault(int(experiment), {}).setdefault(str(day)[:10], []).append(user)
    op.drop_index(op.f("ix_rollup_first_seen_experiment_id_day"), "rollup_first_seen")
    op.drop_table("rollup_first_seen")
    table = op.create_table(
        "rollup_first_seen",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", name=op.f("pk_rollup_first_seen")),
    )
    rows = []
    for experiment, days in _days(conn).items():
        for day in sorted(days):
            users = sorted(firsts.get(experiment, {}).get(day, []))
            stream = pa.table({"user_id": pa.array(users, pa.string())}) \
                .replace_schema_metadata({FORMAT: FIRST_SEEN})
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, stream.schema) as writer:
                writer.write_table(stream)
            rows.append({"experiment_id": experiment, "day": date.fromisoformat(day),
                         "data": sink.getvalue().to_pybytes()})
    _insert(conn, table, rows)
    if conn.dialect.name == "postgresql" and "lz4" in (conn.execute(sa.text(
            "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"
    )).scalar() or []):  # as revision 0015 stored it
        op.execute(sa.text("ALTER TABLE rollup_first_seen ALTER COLUMN data "
                           "SET COMPRESSION lz4"))
