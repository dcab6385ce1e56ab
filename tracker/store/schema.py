"""Schema migrations through Alembic: the only way the schema changes.

Alembic is imported inside these functions (it is only needed by ``tracker db ...``).
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from tracker.errors import TrackerError
from tracker.store.db import schema_revision, transaction

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(connection: sa.Connection | None = None):
    """An Alembic ``Config`` pointing at ``migrations/``, bound to ``connection`` if given."""
    from alembic.config import Config

    if not (MIGRATIONS / "env.py").exists():
        raise TrackerError(f"migrations folder not found at {MIGRATIONS}: install tracker from "
                           "its source tree (pip install -e .)")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(engine: sa.Engine, revision: str = "head") -> str | None:
    """Migrate the database up to ``revision``; returns the revision it is at afterwards."""
    from alembic import command

    with transaction(engine, write=True) as conn:
        command.upgrade(alembic_config(conn), revision)
    return current(engine)


def downgrade(engine: sa.Engine, revision: str = "-1") -> str | None:
    """Migrate the database down to ``revision`` (default: one step)."""
    from alembic import command

    with transaction(engine, write=True) as conn:
        command.downgrade(alembic_config(conn), revision)
    return current(engine)


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
