"""One rollup at a time per experiment.

PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``) held by a dedicated
connection for the whole run; the server drops it when that connection dies, so a killed
rollup never leaves a stale lock. SQLite: an exclusive ``flock`` on a file next to the
database (``<db>.rollup-<experiment id>.lock``); the kernel drops it when the process dies.
An in-memory SQLite database is private to its process: no lock is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa

from tracker.config import sqlite_path
from tracker.errors import Busy

_NAMESPACE = 0x7472  # "tr": the first key of tracker's advisory locks
# Advisory locks are per database; the schema is part of the second key so that tracker
# installations in different schemas of one database do not block each other.
_KEY = "hashtext(current_schema() || ':' || CAST(:b AS text))"


@contextmanager
def rollup_lock(engine: sa.Engine, experiment_id: int, experiment_key: str) -> Iterator[None]:
    busy = Busy(f"a rollup of experiment {experiment_key!r} is already running; "
                "this one stops without changing anything")
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            got = conn.execute(sa.text(f"SELECT pg_try_advisory_lock(:a, {_KEY})"),
                               {"a": _NAMESPACE, "b": experiment_id}).scalar()
            conn.commit()
            if not got:
                raise busy
            try:
                yield
            finally:
                conn.execute(sa.text(f"SELECT pg_advisory_unlock(:a, {_KEY})"),
                             {"a": _NAMESPACE, "b": experiment_id})
                conn.commit()
        return
    path = sqlite_path(engine.url.render_as_string(hide_password=False))
    if path is None:
        yield
        return
    import fcntl

    lock_path = Path(f"{path}.rollup-{experiment_id}.lock")
    with open(lock_path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
