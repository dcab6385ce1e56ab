"""The SQL of a user's values at their first exposure (the rollup's user dimensions,
:mod:`tracker.rollup.levels`): a context key of their first list, their cohort and their
pre-period activity; a chunk's users' values; the users first exposed on a day per value;
and the users whose values the new rows may change.

A user's first exposure is the earliest served of their impressions of the experiment
that the rollup can place on a day (in a tie, the smaller impression id in byte order: what
the logs say, not the order they arrived in, as the Spark engine reads the lake), found
through the
``(user_id, served_at)`` index; the window before it is CUPED's (``cuped_days``), holding
what occurred in it whenever it was logged.
"""

from __future__ import annotations

import pyarrow as pa
import sqlalchemy as sa

from tracker.rollup.days import END_INSTANT, FIRST_INSTANT
from tracker.rollup.queries import context_value, day_filter, lists_where, slice_column
from tracker.store.arrow import ArrowReader


def _first_of_user(experiment_id: int, alias: str) -> str:
    """SQL selecting the impressions of the experiment of the user of ``alias``'s row
    (as ``f``) that the rollup can place on a day, through the ``(user_id, served_at)``
    index (a unary ``+`` keeps SQLite off the experiment's, which it otherwise scans)."""
    return (f"FROM impression f WHERE +f.experiment_id = {int(experiment_id)} "
            f"AND f.user_id = {alias}.user_id AND f.served_at >= {FIRST_INSTANT} "
            f"AND f.served_at < {END_INSTANT}")


def _key(dialect: str, alias: str) -> str:
    """SQL of an impression's id compared in byte order (PostgreSQL's collations may order
    text otherwise)."""
    return f'{alias}.impression_key COLLATE "C"' if dialect == "postgresql" else \
        f"{alias}.impression_key"


def first_exposure_value(dialect: str, key: str, experiment_id: int,
                         alias: str = "u") -> str:
    """SQL of the text of ``key`` in the ``context`` of the first exposure (the earliest
    served impression of the experiment, the smaller impression id in a tie) of the user
    of ``alias``'s row (:func:`context_value`)."""
    return (f"(SELECT {context_value(dialect, key, 'f')} {_first_of_user(experiment_id, alias)} "
            f"ORDER BY f.served_at, {_key(dialect, 'f')} LIMIT 1)")


COHORTS = ("new", "returning")
"""The values of the built-in ``cohort`` dimension: no interaction in the ``cuped_days``
before the user's first exposure, or some."""


def cohort_value(experiment_id: int, window_us: int, alias: str = "u") -> str:
    """SQL of the cohort (:data:`COHORTS`) of the user of ``alias``'s row: whether any
    interaction of theirs occurred in the ``window_us`` before their first exposure (the
    window of CUPED's covariates, whenever the rows were logged)."""
    first = f"(SELECT min(f.served_at) {_first_of_user(experiment_id, alias)})"
    return ("CASE WHEN EXISTS (SELECT 1 FROM interaction c "
            f"WHERE c.user_id = {alias}.user_id AND c.occurred_at < {first} "
            f"AND c.occurred_at >= {first} - {int(window_us)}) "
            f"THEN '{COHORTS[1]}' ELSE '{COHORTS[0]}' END")


def activity_count(experiment_id: int, window_us: int, alias: str) -> str:
    """SQL of the interactions of the user of ``alias``'s row that occurred in the
    ``window_us`` before their first exposure (CUPED's ``pre_interactions``)."""
    first = f"(SELECT min(f.served_at) {_first_of_user(experiment_id, alias)})"
    return ("(SELECT count(*) FROM interaction c "
            f"WHERE c.user_id = {alias}.user_id AND c.occurred_at < {first} "
            f"AND c.occurred_at >= {first} - {int(window_us)})")


def activity_value(experiment_id: int, window_us: int, floors: list[tuple[int, str]],
                   alias: str = "u") -> str:
    """SQL of the activity slice of the user of ``alias``'s row: the name of the last of
    ``floors`` (``(lowest count, name)``, ascending; the first's is 0) that their
    :func:`activity_count` reaches."""
    count = activity_count(experiment_id, window_us, alias)
    cases = " ".join(f"WHEN n >= {int(low)} THEN '{name}'" for low, name in reversed(floors))
    return (f"(SELECT CASE {cases} END FROM (SELECT {count} AS n) counted)")


def activity_counts(conn: sa.Connection, experiment_id: int, start: int, end: int,
                    window_us: int) -> list[tuple[int, int]]:
    """The users whose first exposure was served in ``[start, end)``, per
    :func:`activity_count`: ``(count, users)``."""
    count = activity_count(experiment_id, window_us, "imp")
    earlier = _earlier_of_user(experiment_id, conn.dialect.name)
    return [(int(n), int(users)) for n, users in conn.execute(sa.text(
        f"SELECT {count} AS n, count(*) AS users FROM impression imp WHERE {day_filter()} "
        f"AND NOT EXISTS ({earlier}) GROUP BY 1"),
        {"experiment": experiment_id, "start": start, "end": end})]


def _earlier_of_user(experiment_id: int, dialect: str) -> str:
    """SQL of an impression of the experiment's user of ``imp`` served before it (the
    smaller impression id first in a tie): none for the user's first exposure."""
    return (f"SELECT 1 {_first_of_user(experiment_id, 'imp')} AND (f.served_at < "
            f"imp.served_at OR f.served_at = imp.served_at AND {_key(dialect, 'f')} < "
            f"{_key(dialect, 'imp')})")


def user_slices(reader: ArrowReader, experiment_id: int, start: int, end: int, low: int,
                high: int, users: str | None, slices: tuple[tuple[str, str], ...]) -> pa.Table:
    """The users of a chunk's lists (:func:`~tracker.rollup.queries.served_lists`), once
    each: ``user``, then per ``(dimension, SQL of the value of the user ``u``)`` of
    ``slices`` (e.g. :func:`first_exposure_value`) the user's (``slice:<dimension>``). A
    user's value costs index lookups: read once per user of the chunk, not once per
    list."""
    values = "".join(f", {sql}" for _, sql in slices)
    where = lists_where(reader, experiment_id, start, end, low, high, users)
    schema = pa.schema([pa.field("user", pa.string()),
                        *(pa.field(slice_column(k), pa.string()) for k, _ in slices)])
    return reader.read(f"SELECT u.user_id{values} FROM (SELECT DISTINCT imp.user_id "
                       f"FROM impression imp WHERE {where}) u", schema)


def first_exposure_counts(conn: sa.Connection, experiment_id: int, start: int, end: int,
                          key: str) -> list[tuple[str | None, int]]:
    """The users whose first exposure was served in ``[start, end)``, per value of its
    ``context`` key ``key`` (None: without one)."""
    value = context_value(conn.dialect.name, key)
    earlier = _earlier_of_user(experiment_id, conn.dialect.name)
    return [(v, int(n)) for v, n in conn.execute(sa.text(
        f"SELECT {value} AS v, count(*) AS n FROM impression imp WHERE {day_filter()} "
        f"AND NOT EXISTS ({earlier}) GROUP BY 1"),
        {"experiment": experiment_id, "start": start, "end": end})]


def relabelled_users(conn: sa.Connection, experiment_id: int, after: int, through: int,
                     i_after: int, i_through: int, window_us: int | None) -> set[str]:
    """The users whose first exposure the impressions of ids ``(after, through]`` may move
    (served before each of the user's older ones, or with one in a tie), and with
    ``window_us``, those an interaction of ids ``(i_after, i_through]`` that occurred in the
    window before their first exposure (:func:`cohort_value`) may move to another cohort."""
    older = (f"SELECT min(f.served_at) FROM impression f WHERE +f.experiment_id = "
             f"{int(experiment_id)} AND f.user_id = n.user_id AND f.id <= {int(after)} "
             f"AND f.served_at >= {FIRST_INSTANT} AND f.served_at < {END_INSTANT}")
    users = {u for (u,) in conn.execute(sa.text(  # the older ones looked up once per user
        "SELECT n.user_id FROM (SELECT imp.user_id, min(imp.served_at) AS served "
        "FROM impression imp WHERE imp.id > :after AND imp.id <= :through "
        "AND imp.experiment_id = :experiment "
        f"AND imp.served_at >= {FIRST_INSTANT} AND imp.served_at < {END_INSTANT} "
        f"GROUP BY imp.user_id) n WHERE n.served <= ({older})"),
        {"after": after, "through": through, "experiment": experiment_id})}
    if window_us is not None:
        # per user of the new interactions, their first exposure looked up once: a user
        # with a new interaction before it and one inside its window (over every user, an
        # interaction of both; more users than changed cost a recompute, never a result)
        first = f"(SELECT min(f.served_at) {_first_of_user(experiment_id, 'c')})"
        users |= {u for (u,) in conn.execute(sa.text(
            f"SELECT x.user_id FROM (SELECT c.user_id, c.lo, c.hi, {first} AS first "
            "FROM (SELECT it.user_id, min(it.occurred_at) AS lo, max(it.occurred_at) AS hi "
            "FROM interaction it WHERE it.id > :after AND it.id <= :through "
            "GROUP BY it.user_id) c) x "
            f"WHERE x.lo < x.first AND x.hi >= x.first - {int(window_us)}"),
            {"after": i_after, "through": i_through})}
    return users


def user_days(conn: sa.Connection, experiment_id: int, users: list[str],
              through: int) -> list[tuple[str, int]]:
    """``(user, served)`` of every impression of ``users`` in the experiment up to id
    ``through`` that the rollup can place on a day."""
    rows = []
    for at in range(0, len(users), 500):
        rows += conn.execute(sa.text(
            "SELECT imp.user_id, imp.served_at FROM impression imp "
            "WHERE imp.experiment_id = :experiment AND imp.user_id IN :users "
            f"AND imp.id <= :through AND imp.served_at >= {FIRST_INSTANT} "
            f"AND imp.served_at < {END_INSTANT}").bindparams(
                sa.bindparam("users", expanding=True)),
            {"experiment": experiment_id, "users": users[at:at + 500],
             "through": through}).all()
    return [(u, int(s)) for u, s in rows]


def first_cells(conn: sa.Connection, experiment_id: int, users: list[str]) -> dict[str, int]:
    """The arm id of each of ``users``' first exposure (module docstring), through the
    ``(user_id, served_at)`` index; a user without impressions the rollup can place is
    absent."""
    first = (f"(SELECT f.arm_id {_first_of_user(experiment_id, 'u')} "
             f"ORDER BY f.served_at, {_key(conn.dialect.name, 'f')} LIMIT 1)")
    found: dict[str, int] = {}
    for at in range(0, len(users), 500):
        found.update((u, int(a)) for u, a in conn.execute(sa.text(
            f"SELECT u.user_id, {first} FROM (SELECT DISTINCT imp.user_id FROM impression imp "
            "WHERE +imp.experiment_id = :experiment AND imp.user_id IN :users) u").bindparams(
                sa.bindparam("users", expanding=True)),
            {"experiment": experiment_id, "users": users[at:at + 500]}) if a is not None)
    return found
