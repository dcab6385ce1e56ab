"""Alembic environment. Run through ``tracker db upgrade|downgrade|current`` (which passes an
open connection in ``config.attributes["connection"]``) or plain ``alembic`` with alembic.ini.
"""

from __future__ import annotations

from alembic import context

from tracker.store.tables import metadata

config = context.config


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,  # SQLite cannot ALTER most things: copy-and-move tables
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from tracker.config import Settings
    from tracker.store.db import create_engine

    settings = Settings.from_env()
    url = config.get_main_option("sqlalchemy.url") or settings.database_url
    engine = create_engine(url, settings)
    with engine.connect() as conn:
        _run(conn)
        conn.commit()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()
