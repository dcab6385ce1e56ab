"""The rollup's set-based SQL: attribution, served positions, exposure, popularity.

Each query runs inside the database and returns little: one row per impression (with
per-cutoff sums already aggregated), one row per attributed (impression, item) pair, or
nothing at all (``INSERT ... SELECT``). Served lists are exploded with
``unnest(items) WITH ORDINALITY`` on PostgreSQL and ``json_each(items)`` on SQLite; those
two spellings are the only difference between the engines. Times are integer microseconds
(see :mod:`tracker.store.types`), so window arithmetic is plain integer comparison.

Attribution (the rule of the README's "Rollup semantics"): an interaction answers an
impression of the same user when it occurred within ``[served_at, served_at + window]`` and
names no impression, or, when it names an impression key, that impression only (whatever
its time). Its grade is the experiment's event mapping (unknown events grade 0; no mapping:
every event grade 1); the ground truth keeps each item's highest grade and drops grade 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlalchemy as sa

POP_TABLE = "tracker_rollup_pop"


def is_postgresql(conn: sa.Connection) -> bool:
    return conn.dialect.name == "postgresql"


def _fetch(conn: sa.Connection, sql: str, params: dict) -> list[tuple]:
    """All rows of a query as plain tuples, straight from the driver's cursor (in the
    connection's transaction): the rollup's big reads skip SQLAlchemy's row objects, and
    PostgreSQL sends numbers in binary."""
    compiled = sa.text(sql).compile(dialect=conn.dialect)
    values = compiled.construct_params(params)
    args = [values[name] for name in compiled.positiontup] if compiled.positional else values
    raw = conn.connection.driver_connection
    cursor = raw.cursor(binary=True) if is_postgresql(conn) else raw.cursor()
    try:
        cursor.execute(str(compiled), args)
        return cursor.fetchall()
    finally:
        cursor.close()


def _day_filter(alias: str = "imp") -> str:
    return (f"{alias}.experiment_id = :experiment AND {alias}.served_at >= :start "
            f"AND {alias}.served_at < :end")


def _chunk_filter(alias: str = "imp") -> str:
    return f"{_day_filter(alias)} AND {alias}.id >= :low AND {alias}.id <= :high"


def grade_case(relevance: Mapping[str, float] | None) -> tuple[str, dict[str, object]]:
    """SQL for an interaction's grade (column ``it.event_type``) and its bound values."""
    if relevance is None:
        return "1.0", {}
    if not relevance:
        return "0.0", {}
    params: dict[str, object] = {}
    whens = []
    for i, (event, grade) in enumerate(sorted(relevance.items())):
        params[f"ev{i}"], params[f"gr{i}"] = event, float(grade)
        whens.append(f"WHEN :ev{i} THEN :gr{i}")
    return f"CASE it.event_type {' '.join(whens)} ELSE 0.0 END", params


def day_extent(conn: sa.Connection, experiment_id: int, start: int, end: int):
    """(impressions, min id, max id, max served_at, max list length) of one day."""
    length = "cardinality(imp.items)" if is_postgresql(conn) else "json_array_length(imp.items)"
    return conn.execute(sa.text(
        f"SELECT count(*), min(imp.id), max(imp.id), max(imp.served_at), max({length}) "
        f"FROM impression imp WHERE {_day_filter()}"
    ), {"experiment": experiment_id, "start": start, "end": end}).one()


def chunk_bounds(conn: sa.Connection, experiment_id: int, start: int, end: int,
                 rows: int) -> list[tuple[int, int]]:
    """Id ranges that split one day's impressions into chunks of about ``rows``."""
    ids = conn.execute(sa.text(
        f"SELECT id FROM (SELECT imp.id, row_number() OVER (ORDER BY imp.id) AS rn "
        f"FROM impression imp WHERE {_day_filter()}) t "
        "WHERE (t.rn - 1) % :rows = 0 ORDER BY id"
    ), {"experiment": experiment_id, "start": start, "end": end, "rows": rows}).scalars().all()
    bounds = []
    for i, low in enumerate(ids):
        high = ids[i + 1] - 1 if i + 1 < len(ids) else 2**62
        bounds.append((low, high))
    return bounds


def create_popularity(conn: sa.Connection, since: int, before: int) -> int:
    """Fill a temporary table with ln(distinct users) per item over the interactions that
    occurred in ``[since, before)``; returns N, the distinct users in that log."""
    conn.execute(sa.text(f"DROP TABLE IF EXISTS {POP_TABLE}"))
    if is_postgresql(conn):
        conn.execute(sa.text(
            f"CREATE TEMPORARY TABLE {POP_TABLE} (item_id text PRIMARY KEY, "
            "ln_users double precision NOT NULL)"))
    else:
        _sqlite_math(conn)
        conn.execute(sa.text(
            f"CREATE TEMPORARY TABLE {POP_TABLE} (item_id TEXT PRIMARY KEY, "
            "ln_users REAL NOT NULL)"))
    conn.execute(sa.text(
        f"INSERT INTO {POP_TABLE} (item_id, ln_users) "
        "SELECT item_id, ln(CAST(count(DISTINCT user_id) AS DOUBLE PRECISION)) FROM interaction "
        "WHERE occurred_at >= :since AND occurred_at < :before GROUP BY item_id"
    ), {"since": since, "before": before})
    return int(conn.execute(sa.text(
        "SELECT count(DISTINCT user_id) FROM interaction "
        "WHERE occurred_at >= :since AND occurred_at < :before"
    ), {"since": since, "before": before}).scalar_one())


def drop_popularity(conn: sa.Connection) -> None:
    conn.execute(sa.text(f"DROP TABLE IF EXISTS {POP_TABLE}"))


def _sqlite_math(conn: sa.Connection) -> None:
    """SQLite builds without the math functions get ``ln`` from Python (called per item)."""
    import math

    try:
        conn.execute(sa.text("SELECT ln(2.0)"))
    except sa.exc.OperationalError:
        raw = conn.connection.driver_connection
        raw.create_function("ln", 1, math.log, deterministic=True)


def impression_rows(conn: sa.Connection, experiment_id: int, start: int, end: int,
                    low: int, high: int, cutoffs: Sequence[int]):
    """One row per impression of a chunk, ordered by id: ``id, arm_id, user_id, length,
    has_baseline``, then per cutoff k the sum of ln(item users) over the top k
    (``lu_k``), then per cutoff the size of R_k ∩ B_k against the baseline (``ov_k``)."""
    top = max(cutoffs)
    params = {"experiment": experiment_id, "start": start, "end": end, "low": low,
              "high": high, "top": top}
    if is_postgresql(conn):
        lu = [f"sum(CASE WHEN a.ord <= {k} THEN coalesce(p.ln_users, 0) ELSE 0 END)"
              for k in cutoffs]
        ov = [f"sum(CASE WHEN a.ord <= {k} AND a.bpos BETWEEN 1 AND {k} THEN 1 ELSE 0 END)"
              for k in cutoffs]
        sql = (
            "SELECT imp.id, imp.arm_id, imp.user_id, cardinality(imp.items), "
            f"imp.baseline_items IS NOT NULL, {', '.join(lu + ov)} "
            "FROM impression imp CROSS JOIN LATERAL ("
            "  SELECT u.item, u.ord, array_position(imp.baseline_items, u.item) AS bpos"
            "  FROM unnest(imp.items[1:CAST(:top AS integer)]) WITH ORDINALITY AS u(item, ord)"
            f") a LEFT JOIN {POP_TABLE} p ON p.item_id = a.item "
            f"WHERE {_chunk_filter()} GROUP BY imp.id ORDER BY imp.id"
        )
    else:
        lu = [f"sum(CASE WHEN a.key < {k} THEN coalesce(p.ln_users, 0) ELSE 0 END)"
              for k in cutoffs]
        ov = [f"sum(CASE WHEN a.key < {k} AND b.key < {k} THEN 1 ELSE 0 END)" for k in cutoffs]
        sql = (
            "SELECT imp.id, imp.arm_id, imp.user_id, json_array_length(imp.items), "
            f"imp.baseline_items IS NOT NULL, {', '.join(lu + ov)} "
            "FROM impression imp JOIN json_each(imp.items) a "
            "LEFT JOIN json_each(imp.baseline_items) b "
            "  ON b.value = a.value AND b.key < :top "
            f"LEFT JOIN {POP_TABLE} p ON p.item_id = a.value "
            f"WHERE {_chunk_filter()} AND a.key < :top GROUP BY imp.id ORDER BY imp.id"
        )
    return _fetch(conn, sql, params)


def truth_rows(conn: sa.Connection, experiment_id: int, start: int, end: int, low: int,
               high: int, window_us: int, relevance: Mapping[str, float] | None):
    """The ground truth of a chunk's impressions: ``impression id, item, grade, position``
    (1-based rank in the served list, 0 when not served), ordered by impression id; only
    grades > 0."""
    grade, params = grade_case(relevance)
    params.update({"experiment": experiment_id, "start": start, "end": end, "low": low,
                   "high": high, "window": window_us})
    if is_postgresql(conn):
        position = "coalesce(array_position(imp.items, CAST(it.item_id AS text)), 0)"
    else:
        position = ("coalesce((SELECT min(je.key) + 1 FROM json_each(imp.items) je "
                    "WHERE je.value = it.item_id), 0)")
    select = f"SELECT imp.id AS imp_id, it.item_id AS item, {grade} AS grade, {position} AS pos"
    sql = (
        "SELECT t.imp_id, t.item, max(t.grade), min(t.pos) FROM ("
        f"  {select} FROM impression imp JOIN interaction it ON it.user_id = imp.user_id"
        "   AND it.occurred_at >= imp.served_at AND it.occurred_at <= imp.served_at + :window"
        "   AND it.occurred_at >= :start AND it.occurred_at < :end + :window"
        f"  AND it.impression_key IS NULL WHERE {_chunk_filter()}"
        "  UNION ALL"
        f"  {select} FROM impression imp JOIN interaction it"
        f"   ON it.impression_key = imp.impression_key WHERE {_chunk_filter()}"
        ") t GROUP BY t.imp_id, t.item HAVING max(t.grade) > 0 ORDER BY t.imp_id, t.item"
    )
    return _fetch(conn, sql, params)


def exposure_rows(conn: sa.Connection, experiment_id: int, start: int, end: int,
                  cutoffs: Sequence[int]) -> list[tuple]:
    """One day's item exposure: ``(arm_id, item, n_k...)`` per arm and served item, n_k the
    number of lists holding the item in their top k (items anywhere in a list included, with
    zeros: they belong to the catalog)."""
    params = {"experiment": experiment_id, "start": start, "end": end}
    if is_postgresql(conn):
        counts = ", ".join(f"count(*) FILTER (WHERE u.ord <= {int(k)})" for k in cutoffs)
        exploded = ("FROM impression imp CROSS JOIN LATERAL unnest(imp.items) "
                    "WITH ORDINALITY AS u(item, ord)")
        item = "u.item"
    else:
        counts = ", ".join(f"sum(CASE WHEN u.key < {int(k)} THEN 1 ELSE 0 END)"
                           for k in cutoffs)
        exploded = "FROM impression imp JOIN json_each(imp.items) u"
        item = "u.value"
    return _fetch(conn, f"SELECT imp.arm_id, {item}, {counts} {exploded} "
                        f"WHERE {_day_filter()} GROUP BY imp.arm_id, {item}", params)


def tune(conn: sa.Connection) -> None:
    """Give the rollup's big aggregations room in memory (PostgreSQL, this transaction)."""
    if is_postgresql(conn):
        conn.execute(sa.text("SET LOCAL work_mem = '256MB'"))


def changed_hours(conn: sa.Connection, after: int, through: int) -> list[tuple[int, int]]:
    """For interactions with ids in ``(after, through]``: the distinct hours (UTC micros,
    floored) of their times (experiment None), and of their named impressions' serving
    times (with the impression's experiment)."""
    hour = 3_600_000_000
    params = {"after": after, "through": through, "hour": hour}
    rows = conn.execute(sa.text(
        "SELECT DISTINCT (it.occurred_at / :hour) * :hour FROM interaction it "
        "WHERE it.id > :after AND it.id <= :through"
    ), params).scalars().all()
    named = conn.execute(sa.text(
        "SELECT DISTINCT imp.experiment_id, (imp.served_at / :hour) * :hour "
        "FROM interaction it JOIN impression imp ON imp.impression_key = it.impression_key "
        "WHERE it.id > :after AND it.id <= :through"
    ), params).all()
    return [(None, int(h)) for h in rows] + [(int(e), int(h)) for e, h in named]
