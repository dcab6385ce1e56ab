"""One rollup at a time per experiment.

PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``) held by a dedicated
connection for the whole run; the server drops it when that connection dies, so a killed
rollup never leaves a stale lock. A run checks that connection before it commits
(:meth:`HeldLock.confirm`): a run whose lock connection was dropped (e.g. by
``pg_terminate_backend``) commits nothing. Releasing never hides the run's own error: when
the connection is already gone (and the lock with it), the failed release is logged, not
raised. SQLite: an exclusive lock (:mod:`filelock`: ``flock`` on POSIX, ``msvcrt.locking`` on
Windows) on a file next to the database (``<db>.rollup-<experiment id>.lock``); the operating
system drops it when the process dies. An in-memory SQLite database is private to its
process: no lock is needed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy as sa
from filelock import FileLock, Timeout
from sqlalchemy import exc

from tracker.config import sqlite_path
from tracker.errors import Busy, StoreError, StoreUnavailable
from tracker.store.db import translate

log = logging.getLogger(__name__)

_NAMESPACE = 0x7472  # "tr": the first key of tracker's advisory locks
# Advisory locks are per database; the schema is part of the second key so that tracker
# installations in different schemas of one database do not block each other.
_KEY = "hashtext(current_schema() || ':' || CAST(:b AS text))"


@dataclass(frozen=True)
class HeldLock:
    """The lock of one experiment's rollup, held until the ``with`` block ends."""

    experiment_key: str
    connection: sa.Connection | None = None  # PostgreSQL: the session holding the lock

    def confirm(self) -> None:
        """Raise :class:`StoreUnavailable` when the lock may have been lost (its PostgreSQL
        session is gone): another rollup may be running, so this one must not commit."""
        if self.connection is None:
            return
        try:
            self.connection.execute(sa.text("SELECT 1")).scalar_one()
            self.connection.commit()
        except (exc.SQLAlchemyError, StoreError) as error:  # the engine translates driver errors
            raise StoreUnavailable(
                f"lost the connection holding the rollup lock of experiment "
                f"{self.experiment_key!r} ({translate(error)}); this run commits nothing, "
                "the next one recomputes its days") from error


@contextmanager
def rollup_lock(engine: sa.Engine, experiment_id: int, experiment_key: str
                ) -> Iterator[HeldLock]:
    busy = Busy(f"a rollup of experiment {experiment_key!r} is already running; "
                "this one stops without changing anything")
    if engine.dialect.name == "postgresql":
        with _advisory_lock(engine, experiment_id, experiment_key) as conn:
            if conn is None:
                raise busy
            yield HeldLock(experiment_key, conn)
        return
    path = sqlite_path(engine.url.render_as_string(hide_password=False))
    if path is None:
        yield HeldLock(experiment_key)
        return
    # not thread_local: a run's lock is the process's; blocking=False: busy at once, no wait
    lock = FileLock(f"{path}.rollup-{experiment_id}.lock", thread_local=False)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        raise busy from None
    try:
        yield HeldLock(experiment_key)
    finally:
        lock.release()


@contextmanager
def _advisory_lock(engine: sa.Engine, experiment_id: int, experiment_key: str
                   ) -> Iterator[sa.Connection | None]:
    """The connection holding the experiment's advisory lock, None when another session
    holds it; released (or logged as lost) at the end, whatever happened inside."""
    params = {"a": _NAMESPACE, "b": experiment_id}
    try:
        conn = engine.connect()
        got = conn.execute(sa.text(f"SELECT pg_try_advisory_lock(:a, {_KEY})"),
                           params).scalar()
        conn.commit()
    except exc.SQLAlchemyError as error:
        raise translate(error) from error
    try:
        yield conn if got else None
    finally:
        try:
            if got:
                conn.execute(sa.text(f"SELECT pg_advisory_unlock(:a, {_KEY})"), params)
                conn.commit()
        except (exc.SQLAlchemyError, StoreError) as error:
            # the session is gone, and the server dropped its lock with it: nothing to
            # release, and the run's own error (if any) is the one to report
            log.warning("could not release the rollup lock of experiment %r (the server "
                        "dropped it with its connection): %s", experiment_key,
                        translate(error))
        finally:
            try:
                conn.close()
            except (exc.SQLAlchemyError, StoreError):
                log.debug("closing the rollup lock's lost connection failed", exc_info=True)
