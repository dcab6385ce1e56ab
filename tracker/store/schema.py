"""Schema migrations through Alembic: the only way the schema changes.

Alembic is imported inside these functions (it is only needed by ``tracker db ...``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy as sa

from tracker.errors import ExpiredLogs, TrackerError, ValidationError
from tracker.install import MIGRATIONS, shipped
from tracker.store.db import schema_revision, transaction


def alembic_config(connection: sa.Connection | None = None):
    """An Alembic ``Config`` pointing at ``migrations/`` (the installed copy or the source
    checkout's: :func:`tracker.install.shipped`), bound to ``connection`` if given."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(shipped(MIGRATIONS)))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@contextmanager
def _known_revision(revision: str) -> Iterator[None]:
    """Alembic's "no such revision" (and other refusals) as a ValidationError on ``revision``."""
    from alembic.util import CommandError

    try:
        yield
    except CommandError as error:
        raise ValidationError(f"{revision!r}: {error}; expected 'head', 'base', a relative step "
                              "such as '-1', or a revision id (see `tracker db current`)",
                              field="revision") from None


def upgrade(engine: sa.Engine, revision: str = "head") -> str | None:
    """Migrate the database up to ``revision``; returns the revision it is at afterwards."""
    from alembic import command

    with _known_revision(revision), transaction(engine, write=True) as conn:
        command.upgrade(alembic_config(conn), revision)
    return current(engine)


def downgrade(engine: sa.Engine, revision: str = "-1") -> str | None:
    """Migrate the database down to ``revision`` (default: one step).

    Data in the tables it drops is lost: ask :func:`tables_dropped_by` first. A downgrade
    that would forget the retention horizon while keeping results is refused
    (:func:`refuse_forgetting_horizon`).
    """
    from alembic import command

    refuse_forgetting_horizon(engine, tables_dropped_by(engine, revision), revision)
    with _known_revision(revision), transaction(engine, write=True) as conn:
        command.downgrade(alembic_config(conn), revision)
    return current(engine)


def refuse_forgetting_horizon(engine: sa.Engine, dropped: list[TableRows],
                              revision: str) -> None:
    """Raise :class:`~tracker.errors.ExpiredLogs` when a downgrade would drop the record of
    expired logs (``log_expiry``, 0009) but keep rolled-up results (``rollup_day``): the
    rollup would then take the days whose logs were deleted for recomputable and replace
    their results with what is left of the logs. Dropping both (down to before 0003) loses
    nothing more than the results themselves, which the confirmation names."""
    rows = {t.table: t.rows for t in dropped}
    if not rows.get("log_expiry") or "rollup_day" in rows:
        return
    with transaction(engine) as conn:
        names = set(sa.inspect(conn).get_table_names())
        results = _count(conn, "rollup_day") if "rollup_day" in names else 0
    if results:
        raise ExpiredLogs(
            f"downgrading to {revision!r} drops log_expiry, the record of the raw logs "
            f"`tracker logs expire` deleted, but keeps {results} rolled-up day(s): the next "
            "rollup would recompute days whose logs are gone and lose their results. "
            "Refused, nothing changed: stay at 0009 or later, or downgrade past 0003 "
            "(which drops the results too)")


@dataclass(frozen=True)
class TableRows:
    """A table and how many rows it holds."""

    table: str
    rows: int


class _RollBack(Exception):
    """Leaves a dry run's transaction by rolling it back."""


def tables_dropped_by(engine: sa.Engine, revision: str = "-1") -> list[TableRows]:
    """The tables a :func:`downgrade` to ``revision`` would drop, with their row counts.

    Found by running that downgrade inside a transaction and rolling it back (DDL is
    transactional on SQLite and PostgreSQL), so the answer is the migrations' own, never a
    second list kept by hand. Alembic's bookkeeping table is not counted.
    """
    from alembic import command

    dropped: list[TableRows] = []
    try:
        with _known_revision(revision), transaction(engine, write=True) as conn:
            before = sorted(set(sa.inspect(conn).get_table_names()) - {"alembic_version"})
            rows = {name: _count(conn, name) for name in before}
            command.downgrade(alembic_config(conn), revision)
            after = set(sa.inspect(conn).get_table_names())
            dropped = [TableRows(name, rows[name]) for name in before if name not in after]
            raise _RollBack
    except _RollBack:
        pass
    return dropped


def _count(conn: sa.Connection, table: str) -> int:
    return conn.execute(sa.select(sa.func.count()).select_from(sa.table(table))).scalar_one()


def current(engine: sa.Engine) -> str | None:
    """The revision the database is at (None: no tracker schema)."""
    with transaction(engine) as conn:
        return schema_revision(conn)


def head() -> str:
    """The single head revision of ``migrations/``."""
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise TrackerError(f"migrations have {len(heads)} heads {heads}; expected one")
    return heads[0]
