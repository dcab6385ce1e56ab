"""Real failures on purpose, from the database itself (no mocked driver).

PostgreSQL: a statement trigger on a table that raises a chosen SQLSTATE, or terminates its own
backend, for the first ``times`` statements (a sequence counts them: a rollback does not undo
``nextval``). SQLite: another connection holding the write lock.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from tracker.config import sqlite_path

ALWAYS = 1_000_000


def fail_statements(engine: sa.Engine, table: str, times: int, sqlstate: str | None) -> None:
    """PostgreSQL: the first ``times`` INSERT/COPY statements into ``table`` fail with
    ``sqlstate`` (a server-side ``RAISE``), or lose their connection when ``sqlstate`` is None
    (the backend terminates itself: what ``pg_terminate_backend`` from an operator does)."""
    action = ("PERFORM pg_terminate_backend(pg_backend_pid());" if sqlstate is None else
              f"RAISE EXCEPTION 'injected failure' USING ERRCODE = '{sqlstate}';")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE SEQUENCE fault_count")
        conn.exec_driver_sql(f"""CREATE FUNCTION fault() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF nextval('fault_count') <= {int(times)} THEN {action} END IF; RETURN NULL;
            END $$""")
        conn.exec_driver_sql(f"CREATE TRIGGER fault BEFORE INSERT ON {table} "
                             "FOR EACH STATEMENT EXECUTE FUNCTION fault()")


def statements_failed(engine: sa.Engine) -> int:
    """How many statements met the trigger of :func:`fail_statements` (failed or not)."""
    with engine.connect() as conn:
        return conn.exec_driver_sql("SELECT last_value FROM fault_count").scalar_one()


@contextmanager
def write_lock_held(url: str, seconds: float) -> Iterator[None]:
    """SQLite: another connection holds the write lock for ``seconds`` (from a thread), then
    lets go; the block runs meanwhile."""
    taken = threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(str(sqlite_path(url)), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        taken.set()
        threading.Event().wait(seconds)
        conn.execute("ROLLBACK")
        conn.close()

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(10)
    try:
        yield
    finally:
        holder.join()


def stop_failing(engine: sa.Engine, table: str) -> None:
    """PostgreSQL: remove the trigger of :func:`fail_statements`."""
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TRIGGER fault ON {table}")
