"""The rollup's SQL: what changed, a day's extent and chunks, and the reads of one chunk.

The big reads return Arrow tables (:class:`tracker.store.arrow.ArrowReader`: ADBC on
PostgreSQL, column-folded strings on SQLite): a chunk's served lists, the interactions that
may answer them, and the item popularity of a reference period; the attribution and the
metrics are computed from them in numpy (:mod:`tracker.rollup.columnar`). Times are integer
microseconds (see :mod:`tracker.store.types`), so window arithmetic is plain integer
comparison. The big reads inline their integer arguments (never user input) and take no
parameters.

Attribution (the rule of docs/rollup.md): an interaction answers an
impression of the same user when it occurred within ``[served_at, served_at + window]`` and
names no impression, or, when it names an impression key, that impression only (whatever
its time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import sqlalchemy as sa

from tracker.rollup.days import END_INSTANT, FIRST_INSTANT, HOUR
from tracker.store.arrow import LIST, ArrowReader
from tracker.store.db import transaction


def is_postgresql(conn: sa.Connection) -> bool:
    return conn.dialect.name == "postgresql"


def day_filter(alias: str = "imp") -> str:
    return (f"{alias}.experiment_id = :experiment AND {alias}.served_at >= :start "
            f"AND {alias}.served_at < :end")


@dataclass(frozen=True)
class DayExtent:
    """What one day of an experiment holds: its impressions, their id range, the last
    serving time, and the longest list (None when not read yet: :func:`longest_list`)."""

    impressions: int
    first_id: int | None
    last_id: int | None
    last_served: int | None
    longest: int | None


def day_extent(conn: sa.Connection, experiment_id: int, start: int, end: int,
               longest: bool = True) -> DayExtent:
    """The :class:`DayExtent` of the experiment's impressions served in ``[start, end)``
    (without ``longest``, its longest list is left to :func:`longest_list`: it reads every
    list of the day, while the rest comes from the (experiment, served_at) index)."""
    params = {"experiment": experiment_id, "start": start, "end": end}
    count, low, high, last = conn.execute(sa.text(
        "SELECT count(*), min(imp.id), max(imp.id), max(imp.served_at) "
        f"FROM impression imp WHERE {day_filter()}"), params).one()
    extent = DayExtent(int(count), low, high, last, 0 if not count else None)
    if not longest or not count:
        return extent
    return DayExtent(int(count), low, high, last,
                     longest_list(conn, experiment_id, start, end, extent))


def longest_list(conn: sa.Connection, experiment_id: int, start: int, end: int,
                 extent: DayExtent) -> int:
    """The longest list of the day's impressions (on SQLite an upper bound: quotes / 2,
    exact unless an item holds an escaped quote), walking their id range."""
    if not extent.impressions:
        return 0
    where = _chunk_literals(experiment_id, start, end, extent.first_id, extent.last_id, True)
    length = "cardinality(imp.items)" if is_postgresql(conn) else \
        "(length(imp.items) - length(replace(imp.items, '\"', ''))) / 2"
    return int(conn.execute(sa.text(
        f"SELECT max({length}) FROM impression imp WHERE {where}")).scalar_one() or 0)


def tune(conn: sa.Connection) -> None:
    """Give the rollup's big aggregations room in memory (PostgreSQL, this transaction)."""
    if is_postgresql(conn):
        conn.execute(sa.text("SET LOCAL work_mem = '256MB'"))
        conn.execute(sa.text("SET LOCAL jit = off"))  # compiling costs more than it saves


def _hour_of(column: str) -> str:
    """The UTC hour (microseconds, floored) of a time column; ``%`` keeps the dividend's sign
    on both engines, so hours before 1970 floor down too."""
    return f"({column} - (({column} % :hour) + :hour) % :hour)"


def _taken(column: str) -> str:
    """The rows whose time the rollup takes (see :mod:`tracker.rollup.days`)."""
    return f"{column} >= :first_instant AND {column} < :end_instant"


def _untaken(column: str) -> str:
    """The rows the rollup leaves out: two index ranges (the time columns are NOT NULL)."""
    return f"({column} < :first_instant OR {column} >= :end_instant)"


def _range_params() -> dict[str, int]:
    return {"first_instant": FIRST_INSTANT, "end_instant": END_INSTANT, "hour": HOUR}


def changed_hours(conn: sa.Connection, after: int, through: int) -> list[tuple[int, int]]:
    """For interactions with ids in ``(after, through]``: the distinct hours (UTC micros,
    floored) of their times (experiment None), and of their named impressions' serving
    times (with the impression's experiment); times outside the range the rollup takes are
    left out. Through the primary key: "+ 0" keeps SQLite off the ``occurred_at`` index,
    whose range here (every time the rollup takes) is every interaction ever logged (0.07 s
    on night 3 of the sparse nightly benchmark, 0.24 s on night 30)."""
    params = {"after": after, "through": through, **_range_params()}
    rows = conn.execute(sa.text(
        f"SELECT DISTINCT {_hour_of('it.occurred_at')} FROM interaction it "
        f"WHERE it.id > :after AND it.id <= :through AND {_taken('(it.occurred_at + 0)')}"
    ), params).scalars().all()
    named = conn.execute(sa.text(
        f"SELECT DISTINCT imp.experiment_id, {_hour_of('imp.served_at')} "
        "FROM interaction it JOIN impression imp ON imp.impression_key = it.impression_key "
        "WHERE it.id > :after AND it.id <= :through AND it.impression_key IS NOT NULL "
        f"AND {_taken('imp.served_at')}"
    ), params).all()
    return [(None, int(h)) for h in rows] + [(int(e), int(h)) for e, h in named]


def day_id_range(conn: sa.Connection, experiment_id: int, start: int, end: int
                 ) -> tuple[int, int] | None:
    """The lowest and highest id of the experiment's impressions served in ``[start,
    end)`` (through the (experiment, served_at) index), None when it has none. ``id + 0``:
    PostgreSQL would otherwise answer ``min(id)`` by walking the primary key from the
    first impression ever logged to the first of the day, a read that grows with the
    history (0.05 s on day 3 of the nightly benchmark, 0.7-0.9 s on day 30)."""
    low, high = conn.execute(sa.text(
        f"SELECT min(imp.id + 0), max(imp.id + 0) FROM impression imp WHERE {day_filter()}"),
        {"experiment": experiment_id, "start": start, "end": end}).one()
    return None if low is None else (int(low), int(high))


DAY_IMPRESSIONS = pa.schema([pa.field("id", pa.int64(), False),
                             pa.field("user", pa.string(), False),
                             pa.field("served", pa.int64(), False)])


def day_impressions(reader: ArrowReader, experiment_id: int, start: int, end: int, low: int,
                    high: int) -> pa.Table:
    """``id, user, served`` of the experiment's impressions served in ``[start, end)``
    whose ids are in ``[low, high]`` (:func:`day_id_range`): read in id order on SQLite
    (through its index on served_at, every row is a random page read)."""
    postgresql = reader.engine.dialect.name == "postgresql"
    where = _chunk_literals(experiment_id, start, end, low, high, by_id=not postgresql)
    return reader.read("SELECT imp.id, imp.user_id, imp.served_at FROM impression imp "
                       f"WHERE {where}", DAY_IMPRESSIONS)


def new_window_interactions(reader: ArrowReader, start: int, end: int, window_us: int,
                            after: int, through: int) -> pa.Table:
    """``user, item, event, at`` of the interactions with ids in ``(after, through]`` that
    may answer impressions served in ``[start, end)`` by time (naming none, occurred in
    ``[start, end + window)``), through the primary key (``+`` keeps SQLite off the time
    index): which users they answer (:mod:`tracker.rollup.plan`)."""
    postgresql = reader.engine.dialect.name == "postgresql"
    plus = "" if postgresql else "+"
    unkeyed = "it.impression_key IS NULL" if postgresql else "+it.impression_key IS NULL"
    return reader.read(
        "SELECT it.user_id, it.item_id, it.event_type, it.occurred_at FROM interaction it "
        f"WHERE it.id > {int(after)} AND it.id <= {int(through)} "
        f"AND {plus}it.occurred_at >= {int(start)} "
        f"AND {plus}it.occurred_at < {int(end) + int(window_us)} AND {unkeyed}",
        NEW_WINDOW)


_LISTED = "imp.id IN ("


def impressions_in(ids: np.ndarray) -> str:
    """An SQL condition selecting the impressions of ``ids`` (integers, inlined) by their
    primary key: what a day recomputed for some users reads (:mod:`tracker.rollup.partial`;
    the reads below then keep SQLite off their other indexes)."""
    listed = ",".join(str(int(i)) for i in np.unique(ids)) or "NULL"
    return f"{_LISTED}{listed})"


def _listed(users: str | None) -> bool:
    """Whether ``users`` lists impression ids (:func:`impressions_in`), on SQLite (whose
    planner would rather walk an index range and test the list on every row)."""
    return users is not None and users.startswith(_LISTED)


def named_users(conn: sa.Connection, experiment_id: int, start: int, end: int, after: int,
                through: int) -> list[str]:
    """The users of the experiment's impressions served in ``[start, end)`` that an
    interaction with an id in ``(after, through]`` names."""
    return list(conn.execute(sa.text(
        "SELECT DISTINCT imp.user_id FROM interaction it JOIN impression imp "
        "ON imp.impression_key = it.impression_key "
        f"WHERE {day_filter()} AND it.id > :after AND it.id <= :through "
        "AND it.impression_key IS NOT NULL"),
        {"experiment": experiment_id, "start": start, "end": end, "after": after,
         "through": through}).scalars())


def occurred_in(conn: sa.Connection, start: int, end: int, after: int, through: int) -> bool:
    """Whether an interaction with an id in ``(after, through]`` occurred in ``[start,
    end)`` (rows logged late into an experiment's reference period change its popularity:
    :mod:`tracker.rollup.popularity`)."""
    return conn.execute(sa.text(
        "SELECT 1 FROM interaction it WHERE it.id > :after AND it.id <= :through "
        "AND it.occurred_at >= :start AND it.occurred_at < :end LIMIT 1"),
        {"start": start, "end": end, "after": after, "through": through}).first() is not None


def _impressions_of(experiment_id: int, after: int, through: int) -> tuple[str, dict]:
    """The experiment's impressions with ids in ``(after, through]``: through the
    (experiment, served_at) index for all of them, through the primary key ("+ 0" keeps
    both engines off that index, which would walk every row of the experiment) for the
    new ones only."""
    params = {"experiment": experiment_id, "after": after, "through": through}
    if not after:
        return "imp.experiment_id = :experiment AND imp.id <= :through", params
    return "imp.experiment_id + 0 = :experiment AND imp.id > :after AND imp.id <= :through", \
        params


def served_hours(conn: sa.Connection, experiment_id: int, after: int, through: int
                 ) -> list[int]:
    """The distinct UTC hours (micros, floored) in which the experiment's impressions with
    ids in ``(after, through]`` were served, within the range the rollup takes: what the
    days to compute are made of (one row per hour that holds data, whatever the calendar
    span between them)."""
    where, params = _impressions_of(experiment_id, after, through)
    return [int(h) for h in conn.execute(sa.text(
        f"SELECT DISTINCT {_hour_of('imp.served_at')} FROM impression imp "
        f"WHERE {where} AND {_taken('imp.served_at')}"), {**params, **_range_params()}
    ).scalars()]


def untaken_impressions(conn: sa.Connection, experiment_id: int, after: int,
                        through: int) -> int:
    """How many of the experiment's impressions with ids in ``(after, through]`` were
    served outside the range the rollup takes: the rows it leaves out."""
    where, params = _impressions_of(experiment_id, after, through)
    return int(conn.execute(sa.text(
        f"SELECT count(*) FROM impression imp WHERE {where} "
        f"AND {_untaken('imp.served_at')}"), {**params, **_range_params()}).scalar_one())


def untaken_interactions(conn: sa.Connection, after: int, through: int) -> int:
    """How many interactions with ids in ``(after, through]`` occurred outside the range the
    rollup takes: the rows it leaves out."""
    return int(conn.execute(sa.text(
        "SELECT count(*) FROM interaction it WHERE it.id > :after AND it.id <= :through "
        f"AND {_untaken('it.occurred_at')}"),
        {"after": after, "through": through, **_range_params()}).scalar_one())


# --- the big reads: Arrow tables of one chunk or one day ----------------------------------

LISTS = pa.schema([pa.field("id", pa.int64(), False), pa.field("arm", pa.int64(), False),
                   pa.field("user", pa.string(), False), pa.field("served", pa.int64(), False),
                   pa.field("items", LIST, False), pa.field("baseline", LIST),
                   pa.field("received", pa.int64(), False)])
INTERACTIONS = pa.schema([pa.field(name, kind, False) for name, kind in (
    ("user", pa.string()), ("item", pa.string()), ("event", pa.string()), ("at", pa.int64()),
    ("keyed", pa.int64()))])
KEYED = pa.schema([pa.field(name, kind, False) for name, kind in (
    ("impression", pa.int64()), ("item", pa.string()), ("event", pa.string()))])
NEW_WINDOW = pa.schema([pa.field(name, kind, False) for name, kind in (
    ("user", pa.string()), ("item", pa.string()), ("event", pa.string()), ("at", pa.int64()))])
ITEM_USERS = pa.schema([pa.field("item", pa.string(), False),
                        pa.field("users", pa.int64(), False)])


def _chunk_literals(experiment_id: int, start: int, end: int, low: int, high: int,
                    by_id: bool = False, listed: bool = False) -> str:
    """One chunk's impressions (integers only, never user input: safe to inline). ``by_id``
    (SQLite): read the id range in id order rather than through the (experiment,
    served_at) index, whose order is random on disk: a unary ``+`` keeps SQLite off an
    index. ``listed``: the ids are also listed (:func:`impressions_in`), and SQLite is
    kept off every other index so that it looks the listed ids up."""
    plus = "+" if by_id or listed else ""
    key = "+" if listed else ""
    return (f"{plus}imp.experiment_id = {int(experiment_id)} "
            f"AND {plus}imp.served_at >= {int(start)} AND {plus}imp.served_at < {int(end)} "
            f"AND {key}imp.id >= {int(low)} AND {key}imp.id <= {int(high)}")


def _day_literals(experiment_id: int, start: int, end: int, listed: bool = False) -> str:
    plus = "+" if listed else ""
    return (f"{plus}imp.experiment_id = {int(experiment_id)} "
            f"AND {plus}imp.served_at >= {int(start)} AND {plus}imp.served_at < {int(end)}")


def day_ids(reader: ArrowReader, experiment_id: int, start: int, end: int) -> np.ndarray:
    """The ids of one day's impressions, sorted (found through the (experiment, served_at)
    index)."""
    table = reader.read("SELECT imp.id FROM impression imp WHERE "
                        f"imp.experiment_id = {int(experiment_id)} "
                        f"AND imp.served_at >= {int(start)} AND imp.served_at < {int(end)}",
                        pa.schema([pa.field("id", pa.int64(), False)]))
    return np.sort(table["id"].to_numpy())


def chunk_bounds(ids: np.ndarray, rows: int) -> list[tuple[int, int]]:
    """Id ranges that split sorted ``ids`` into chunks of at most ``rows`` ids each.

    >>> chunk_bounds(np.array([3, 5, 9, 12, 20]), 2)
    [(3, 5), (9, 12), (20, 20)]
    """
    return [(int(ids[at]), int(ids[min(at + rows, ids.size) - 1]))
            for at in range(0, ids.size, max(rows, 1))]


def changed_users(after: int, through: int, start: int, end: int, window_us: int) -> str:
    """An SQL condition on ``imp.user_id`` (integers inlined): the users of an interaction
    with an id in ``(after, through]`` that occurred in ``[start, end + window)`` or names
    an impression. It holds for every user whose outcomes of the day ``[start, end)`` those
    interactions change (and maybe a few more: recomputing an unchanged user changes
    nothing), through the interactions' primary key."""
    # one IN over a UNION: PostgreSQL hashes it once (an OR of two IN subqueries ran one
    # of them per impression)
    ids = f"it.id > {int(after)} AND it.id <= {int(through)}"
    return ("imp.user_id IN (SELECT it.user_id FROM interaction it WHERE "
            f"{ids} AND it.occurred_at >= {int(start)} "
            f"AND it.occurred_at < {int(end) + int(window_us)} "
            "UNION SELECT named.user_id FROM interaction it JOIN impression named "
            f"ON named.impression_key = it.impression_key WHERE {ids} "
            "AND it.impression_key IS NOT NULL)")


def _only(users: str | None) -> str:
    return f" AND {users}" if users else ""


def context_value(dialect: str, key: str, alias: str = "imp") -> str:
    """SQL of the text of an impression's ``context`` value at ``key`` (a declared
    dimension's name: ``[A-Za-z0-9_-]``, safe to inline): a string as itself, a number or
    a boolean as JSON writes it, NULL when the key is missing or holds null, an object or
    a list."""
    if not key.replace("_", "").replace("-", "").isalnum() or not key.isascii():
        raise ValueError(f"not a dimension's name: {key!r}")
    if dialect == "postgresql":
        value = f"{alias}.context -> '{key}'"
        return (f"CASE WHEN jsonb_typeof({value}) IN ('string', 'number', 'boolean') "
                f"THEN {alias}.context ->> '{key}' END")
    path = f"'$.\"{key}\"'"
    kind = f"json_type({alias}.context, {path})"
    return (f"CASE {kind} WHEN 'text' THEN json_extract({alias}.context, {path}) "
            f"WHEN 'integer' THEN CAST(json_extract({alias}.context, {path}) AS TEXT) "
            f"WHEN 'real' THEN CAST(json_extract({alias}.context, {path}) AS TEXT) "
            f"WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' END")


def slice_column(key: str) -> str:
    """The column of :func:`served_lists` that holds the lists' values of ``key``."""
    return f"slice:{key}"


def lists_where(reader: ArrowReader, experiment_id: int, start: int, end: int, low: int,
                 high: int, users: str | None) -> str:
    """The condition of one chunk's lists (``imp``) for :func:`served_lists`."""
    if reader.engine.dialect.name == "postgresql":
        where = _chunk_literals(experiment_id, start, end, low, high)
    else:
        where = _chunk_literals(experiment_id, start, end, low, high, by_id=True,
                                listed=_listed(users))
    return where + _only(users)


def served_lists(reader: ArrowReader, experiment_id: int, start: int, end: int, low: int,
                 high: int, top: int, users: str | None = None,
                 slices: tuple[tuple[str, str], ...] = ()) -> pa.Table:
    """A chunk's impressions (in no set order): ``id, arm, user, served``, ``items`` (the
    whole list), ``baseline`` (null when the impression has none; on PostgreSQL only
    its first ``top`` items) and ``received``, then per ``(dimension, SQL of its value)``
    of ``slices`` the list's value (:func:`slice_column`; e.g. :func:`context_value`).
    ``users``: only those of the users it selects (:func:`changed_users`)."""
    values = "".join(f", {sql}" for _, sql in slices)
    schema = pa.schema([*LISTS, *(pa.field(slice_column(k), pa.string()) for k, _ in slices)])
    if reader.engine.dialect.name == "postgresql":
        # sliced only when longer: building a slice of every array doubled the server's
        # cost of the read (1M lists of 10, every one within the top)
        baseline = (f"CASE WHEN cardinality(imp.baseline_items) > {int(top)} "
                    f"THEN imp.baseline_items[1:{int(top)}] ELSE imp.baseline_items END")
    else:
        baseline = "imp.baseline_items"
    where = lists_where(reader, experiment_id, start, end, low, high, users)
    return reader.read("SELECT imp.id, imp.arm_id, imp.user_id, imp.served_at, "
                       f"imp.items, {baseline}, imp.received_at{values} FROM impression imp "
                       f"WHERE {where}", schema)


def context_counts(conn: sa.Connection, experiment_id: int, start: int, end: int,
                   keys: list[str]) -> dict[str, list[tuple[str | None, int]]]:
    """Per ``context`` key of ``keys``, the lists served in ``[start, end)`` per value of
    that key (None: without one). One pass over the day's lists for every key: their
    values are extracted once, together (the JSON of a list's context is parsed once for
    all keys, 45% of the time of a pass per key on SQLite)."""
    if not keys:
        return {}
    dialect = conn.dialect.name
    values = ", ".join(f"{context_value(dialect, key)} AS v{i}" for i, key in enumerate(keys))
    counts = " UNION ALL ".join(f"SELECT {i}, v{i}, count(*) FROM lists GROUP BY 2"
                                for i in range(len(keys)))
    found: dict[str, list[tuple[str | None, int]]] = {key: [] for key in keys}
    for i, v, n in conn.execute(sa.text(
            f"WITH lists AS MATERIALIZED (SELECT {values} FROM impression imp "
            f"WHERE {day_filter()}) {counts}"),
            {"experiment": experiment_id, "start": start, "end": end}):
        found[keys[i]].append((v, int(n)))
    return found


def count_window_interactions(conn: sa.Connection, start: int, end: int,
                              window_us: int) -> int:
    """At least as many interactions as :func:`window_interactions` of a whole day reads
    (those that name an impression included: the time index alone answers)."""
    return int(conn.execute(sa.text(
        "SELECT count(*) FROM interaction it "
        f"WHERE it.occurred_at >= {int(start)} "
        f"AND it.occurred_at < {int(end) + int(window_us)}")).scalar_one())


def window_interactions(reader: ArrowReader, experiment_id: int, start: int, end: int,
                        window_us: int, chunk: tuple[int, int] | None = None,
                        users: str | None = None) -> pa.Table:
    """The interactions that occurred in ``[start, end + window)``: those naming no
    impression may answer impressions served in ``[start, end)`` by time. With ``chunk``
    (an id range), only those of users with an impression in it; with ``users``, only
    those of the day's users it selects
    (:func:`changed_users`, :func:`impressions_in`). Columns ``user, item, event, at``
    and ``keyed`` (1 when it names an impression, else 0)."""
    postgresql = reader.engine.dialect.name == "postgresql"
    select = ("SELECT it.user_id, it.item_id, it.event_type, it.occurred_at, "
              "CASE WHEN it.impression_key IS NULL THEN 0 ELSE 1 END FROM interaction it "
              f"WHERE it.occurred_at >= {int(start)} "
              f"AND it.occurred_at < {int(end) + int(window_us)}")
    if chunk is not None or users:
        listed = not postgresql and _listed(users)
        where = _chunk_literals(experiment_id, start, end, *chunk, listed=listed) \
            if chunk is not None else _day_literals(experiment_id, start, end, listed)
        select += (" AND it.user_id IN (SELECT imp.user_id FROM impression imp "
                   f"WHERE {where}{_only(users)})")
    return reader.read(select, INTERACTIONS)


def keyed_interactions(reader: ArrowReader, experiment_id: int, start: int, end: int, low: int,
                       high: int, users: str | None = None) -> pa.Table:
    """Interactions that name one of a chunk's impressions (``users``: of the users it
    selects), whatever their time: columns ``impression`` (its id), ``item``, ``event``."""
    postgresql = reader.engine.dialect.name == "postgresql"
    where = _chunk_literals(experiment_id, start, end, low, high,
                            listed=not postgresql and _listed(users)) + _only(users)
    join, keyed = "JOIN", "it.impression_key IS NOT NULL"
    if not postgresql:
        # SQLite: ">= ''" (every text) rather than IS NOT NULL, which its planner takes for
        # most rows and answers with a scan of every interaction ever logged. It probes the
        # interactions once per impression of the chunk; when fewer interactions name an
        # impression at all, walking those is cheaper (CROSS JOIN fixes SQLite's loop
        # order). Counting stops past the chunk's size: the cost stays the chunk's.
        keyed = "it.impression_key >= ''"
        rows = high - low + 1
        with transaction(reader.engine) as conn:
            named = conn.execute(sa.text(
                "SELECT count(*) FROM (SELECT 1 FROM interaction it "
                f"WHERE {keyed} LIMIT {int(rows)})")).scalar_one()
        if named < rows:
            join = "CROSS JOIN"
    return reader.read(f"SELECT imp.id, it.item_id, it.event_type FROM interaction it "
                       f"{join} impression imp ON imp.impression_key = it.impression_key "
                       f"WHERE {keyed} AND {where}", KEYED)


def item_users(reader: ArrowReader, start: int, end: int) -> tuple[pa.Table, int]:
    """Per item, the distinct users of the interactions that occurred in ``[start, end)``
    (columns ``item, users``), and the distinct users of them all: the database counts,
    one row per item comes back."""
    where = f"it.occurred_at >= {int(start)} AND it.occurred_at < {int(end)}"
    per_item = reader.read("SELECT it.item_id, count(DISTINCT it.user_id) FROM interaction it "
                           f"WHERE {where} GROUP BY it.item_id", ITEM_USERS)
    with transaction(reader.engine) as conn:
        users = conn.execute(sa.text("SELECT count(DISTINCT it.user_id) FROM interaction it "
                                     f"WHERE {where}")).scalar_one()
    return per_item, int(users)
