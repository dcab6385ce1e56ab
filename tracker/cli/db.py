"""``tracker db``: create and migrate the schema."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from tracker.cli.common import confirm, open_engine, options_for, where

if TYPE_CHECKING:
    from tracker.store.schema import TableRows


@click.group()
def db() -> None:
    """Create and migrate the database schema (Alembic)."""


@db.command()
@click.option("--revision", default="head", show_default=True, help="Target revision.")
def upgrade(revision: str) -> None:
    """Create the schema, or migrate it up to REVISION."""
    from tracker.store import schema

    engine, _ = open_engine()
    before = schema.current(engine)
    with options_for(revision="--revision"):
        after = schema.upgrade(engine, revision)
    click.echo(f"{where(engine)}: schema {before or 'empty'} -> {after}")


@db.command()
@click.option("--revision", default="-1", show_default=True,
              help="Target revision ('-1' = one step down, 'base' = drop everything).")
@click.option("--yes", is_flag=True,
              help="Drop tables that hold rows without asking (for scripts).")
def downgrade(revision: str, yes: bool) -> None:
    """Migrate the schema down (data in dropped tables is lost).

    When it would drop tables that hold rows, it names them with their row counts and asks
    first; without a terminal to ask on, it refuses (exit 2) unless --yes is given.
    """
    from tracker.store import schema

    engine, _ = open_engine()
    before = schema.current(engine)
    with options_for(revision="--revision"):
        dropped = schema.tables_dropped_by(engine, revision)
        schema.refuse_forgetting_horizon(engine, dropped, revision)  # before asking
        _confirm_dropping([t for t in dropped if t.rows], revision, yes)
        after = schema.downgrade(engine, revision)
    click.echo(f"{where(engine)}: schema {before or 'empty'} -> {after or 'empty'}")


def _confirm_dropping(tables: list[TableRows], revision: str, yes: bool) -> None:
    """Ask before dropping ``tables`` (:class:`~tracker.store.schema.TableRows` holding rows):
    ``--yes`` skips the question; with no terminal on standard input it is a usage error."""
    if not tables:
        return
    listing = ", ".join(f"{t.table} ({t.rows} row{'s' if t.rows != 1 else ''})"
                        for t in tables)
    question = f"downgrading to {revision!r} drops tables holding rows: {listing}"
    confirm(question, yes, action="drop them", lost="Their rows are lost.")


@db.command()
def current() -> None:
    """Print the schema revision of the database and the one this tracker needs."""
    from tracker.store import schema

    engine, _ = open_engine()
    revision = schema.current(engine)
    head = schema.head()
    state = "up to date" if revision == head else "run `tracker db upgrade`"
    click.echo(f"{where(engine)}: {revision or 'no schema'} (head {head}: {state})")

