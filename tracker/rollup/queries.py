"""The rollup's SQL: what changed, a day's extent and chunks, and the reads of one chunk.

The big reads return Arrow tables: a chunk's served lists (PostgreSQL ``COPY ... CSV`` with
each list joined by a separator and split back by pyarrow; SQLite's stored JSON split the
same way), the interactions that may answer them, and a day's distinct (item, user) pairs;
the attribution and the metrics are computed from them in numpy
(:mod:`tracker.rollup.columnar`). Times are integer microseconds (see
:mod:`tracker.store.types`), so window arithmetic is plain integer comparison.

Attribution (the rule of the README's "Rollup semantics"): an interaction answers an
impression of the same user when it occurred within ``[served_at, served_at + window]`` and
names no impression, or, when it names an impression key, that impression only (whatever
its time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlalchemy as sa


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


def day_extent(conn: sa.Connection, experiment_id: int, start: int, end: int):
    """(impressions, min id, max id, max served_at, longest list) of one day; on SQLite the
    longest list is an upper bound (quotes / 2: exact unless an item holds an escaped
    quote), read in id order."""
    params = {"experiment": experiment_id, "start": start, "end": end}
    if is_postgresql(conn):
        return conn.execute(sa.text(
            "SELECT count(*), min(imp.id), max(imp.id), max(imp.served_at), "
            f"max(cardinality(imp.items)) FROM impression imp WHERE {_day_filter()}"
        ), params).one()
    count, low, high, last = conn.execute(sa.text(
        "SELECT count(*), min(imp.id), max(imp.id), max(imp.served_at) "
        f"FROM impression imp WHERE {_day_filter()}"), params).one()
    if not count:
        return count, low, high, last, 0
    longest = conn.execute(sa.text(
        "SELECT max(length(imp.items) - length(replace(imp.items, '\"', ''))) / 2 "
        f"FROM impression imp WHERE {_chunk_literals(experiment_id, start, end, low, high, True)}"
    )).scalar_one()
    return count, low, high, last, longest


def chunk_bounds(conn: sa.Connection, experiment_id: int, start: int, end: int,
                 rows: int, last_id: int) -> list[tuple[int, int]]:
    """Id ranges that split one day's impressions into chunks of about ``rows``."""
    ids = conn.execute(sa.text(
        f"SELECT id FROM (SELECT imp.id, row_number() OVER (ORDER BY imp.id) AS rn "
        f"FROM impression imp WHERE {_day_filter()}) t "
        "WHERE (t.rn - 1) % :rows = 0 ORDER BY id"
    ), {"experiment": experiment_id, "start": start, "end": end, "rows": rows}).scalars().all()
    bounds = []
    for i, low in enumerate(ids):
        high = ids[i + 1] - 1 if i + 1 < len(ids) else last_id
        bounds.append((low, high))
    return bounds


def tune(conn: sa.Connection) -> None:
    """Give the rollup's big aggregations room in memory (PostgreSQL, this transaction)."""
    if is_postgresql(conn):
        conn.execute(sa.text("SET LOCAL work_mem = '256MB'"))
        conn.execute(sa.text("SET LOCAL jit = off"))  # compiling costs more than it saves


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
        "WHERE it.id > :after AND it.id <= :through AND it.impression_key IS NOT NULL"
    ), params).all()
    return [(None, int(h)) for h in rows] + [(int(e), int(h)) for e, h in named]


# --- the columnar path: one chunk of a day's lists and the interactions that may answer them,
# shipped as Arrow tables (PostgreSQL: COPY ... CSV parsed by pyarrow; SQLite: one cursor
# pass). The item lists travel as one string per list joined with SEPARATOR; a list whose
# items hold the separator is caught by its length and re-read as an array.

SEPARATOR = "\x1f"
LIST_COLUMNS = ("id", "arm", "user", "served", "length", "baseline_length", "items", "baseline")
INTERACTION_COLUMNS = ("user", "item", "event", "at")


def _copy_csv(conn: sa.Connection, select: str, names: Sequence[str],
              types: Mapping[str, object]):
    """``COPY (select) TO STDOUT`` as CSV, parsed by pyarrow into a table (PostgreSQL)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    raw = conn.connection.driver_connection
    parts: list[bytes] = []
    with raw.cursor() as cursor, cursor.copy(f"COPY ({select}) TO STDOUT (FORMAT csv)") as copy:
        for data in copy:
            parts.append(bytes(data))
    if not parts:
        return pa.table({name: pa.array([], type=types[name]) for name in names})
    data = b"".join(parts)

    def parse(newlines: bool):
        return pcsv.read_csv(
            pa.BufferReader(data),
            read_options=pcsv.ReadOptions(column_names=list(names), block_size=1 << 24),
            parse_options=pcsv.ParseOptions(newlines_in_values=newlines),
            convert_options=pcsv.ConvertOptions(column_types=dict(types), null_values=[""],
                                                strings_can_be_null=True,
                                                quoted_strings_can_be_null=False))

    try:  # twice as fast; a value holding a line break (quoted) breaks a row: then exact
        return parse(False)
    except pa.ArrowInvalid:
        return parse(True)


def _chunk_literals(experiment_id: int, start: int, end: int, low: int, high: int,
                    by_id: bool = False) -> str:
    """One chunk's impressions (integers only, never user input: safe to inline into a COPY
    statement). ``by_id`` (SQLite): read the id range in id order rather than through the
    (experiment, served_at) index, whose order is random on disk: a unary ``+`` keeps
    SQLite off an index."""
    plus = "+" if by_id else ""
    return (f"{plus}imp.experiment_id = {int(experiment_id)} "
            f"AND {plus}imp.served_at >= {int(start)} AND {plus}imp.served_at < {int(end)} "
            f"AND imp.id >= {int(low)} AND imp.id <= {int(high)}")


def served_lists(conn: sa.Connection, experiment_id: int, start: int, end: int, low: int,
                 high: int, top: int):
    """A chunk's impressions (in no set order) as an Arrow table: ``id, arm, user, length``, and
    ``items`` (the whole list) and ``baseline`` (its first ``top`` items, null when the
    impression has none) as list<string> columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    where = _chunk_literals(experiment_id, start, end, low, high)
    if is_postgresql(conn):
        sep = "E'\\x1f'"
        table = _copy_csv(
            conn,
            f"SELECT imp.id, imp.arm_id, imp.user_id, imp.served_at, cardinality(imp.items), "
            f"cardinality(imp.baseline_items[1:{int(top)}]), "
            f"array_to_string(imp.items, {sep}), "
            f"array_to_string(imp.baseline_items[1:{int(top)}], {sep}) "
            f"FROM impression imp WHERE {where}",
            LIST_COLUMNS, {"id": pa.int64(), "arm": pa.int64(), "user": pa.string(),
                           "served": pa.int64(), "length": pa.int64(),
                           "baseline_length": pa.int64(), "items": pa.string(),
                           "baseline": pa.string()})
        items = _split(table["items"], table["length"])
        baseline = _split(table["baseline"], table["baseline_length"])
        if not (_lengths_agree(items, table["length"])
                and _lengths_agree(baseline, table["baseline_length"])):
            items, baseline = _arrays_of(conn, where, top)
    else:
        where = _chunk_literals(experiment_id, start, end, low, high, by_id=True)
        rows = _fetch(conn, "SELECT imp.id, imp.arm_id, imp.user_id, imp.served_at, "
                            f"imp.items, imp.baseline_items FROM impression imp WHERE {where}",
                      {})
        columns = list(zip(*rows, strict=True)) if rows else [()] * 6
        items = _json_lists(pa.array(columns[4], type=pa.string()))
        baseline = _json_lists(pa.array(columns[5], type=pa.string()))
        table = pa.table({
            "id": pa.array(columns[0], type=pa.int64()),
            "arm": pa.array(columns[1], type=pa.int64()),
            "user": pa.array(columns[2], type=pa.string()),
            "served": pa.array(columns[3], type=pa.int64()),
            "length": pc.list_value_length(items),
        })
    return pa.table({"id": table["id"], "arm": table["arm"], "user": table["user"],
                     "served": table["served"], "length": table["length"], "items": items,
                     "baseline": baseline})


def _split(column, lengths):
    """Joined strings back to lists ('' is an empty list, not [''])."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = pa.list_(pa.string())
    lists = pc.if_else(pc.equal(lengths, 0), pa.scalar([], type=kind),
                       pc.split_pattern(column, SEPARATOR))
    return pa.chunked_array(lists.chunks, type=kind)


def _lengths_agree(lists, lengths) -> bool:
    import pyarrow.compute as pc

    return bool(pc.all(pc.equal(pc.list_value_length(lists), lengths)).as_py() is not False)


def _arrays_of(conn: sa.Connection, where: str, top: int):
    """The slow, exact path: the lists read as arrays (some item holds the separator)."""
    import pyarrow as pa

    rows = _fetch(conn, f"SELECT imp.items, imp.baseline_items[1:{int(top)}] "
                        f"FROM impression imp WHERE {where}", {})
    kind = pa.list_(pa.string())
    return (pa.chunked_array([pa.array([r[0] for r in rows], type=kind)], type=kind),
            pa.chunked_array([pa.array([r[1] for r in rows], type=kind)], type=kind))


def _json_lists(texts):
    """SQLite's stored JSON arrays of strings as list<string>. Fast path, when no string
    holds an escape and every text is ``[]`` or starts with ``["`` and ends with ``"]``:
    strip the brackets and split on the separators, and check that every list has as many
    items as it has quotes / 2 (so any other spacing is caught); else each array is
    parsed."""
    import orjson
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = pa.list_(pa.string())
    if len(texts) == 0:
        return pa.chunked_array([pa.array([], type=kind)], type=kind)
    if not pc.any(pc.match_substring(texts, "\\")).as_py():
        inner = pc.utf8_slice_codeunits(texts, 2, -2)  # '["a","b"]' -> 'a","b'
        lists = pc.if_else(pc.equal(texts, "[]"), pa.scalar([], type=kind),
                           pc.split_pattern(inner, '","'))
        quotes = pc.count_substring(texts, '"')
        shaped = pc.or_(pc.equal(texts, "[]"),
                        pc.and_(pc.starts_with(texts, '["'), pc.ends_with(texts, '"]')))
        counted = pc.equal(pc.multiply(pc.list_value_length(lists), 2), quotes)
        if pc.all(pc.and_(shaped, counted)).as_py() is not False:
            return pa.chunked_array([lists], type=kind)
    return pa.chunked_array(
        [pa.array([None if t is None else orjson.loads(t) for t in texts.to_pylist()],
                  type=kind)], type=kind)


def window_interactions(conn: sa.Connection, experiment_id: int, start: int, end: int,
                        window_us: int, chunk: tuple[int, int] | None = None):
    """The interactions that may answer impressions served in ``[start, end)`` by time:
    naming no impression, occurred in ``[start, end + window)``; with ``chunk`` (an id
    range), only those of users with an impression in it. An Arrow table ``user, item,
    event, at``."""
    import pyarrow as pa

    # SQLite would otherwise walk the index on impression_key (IS NULL: all of history);
    # the unary + keeps it on the time index
    unkeyed = "it.impression_key IS NULL" if is_postgresql(conn) else \
        "+it.impression_key IS NULL"
    select = (f"SELECT it.user_id, it.item_id, it.event_type, it.occurred_at "
              f"FROM interaction it WHERE it.occurred_at >= {int(start)} "
              f"AND it.occurred_at < {int(end) + int(window_us)} AND {unkeyed}")
    if chunk is not None:
        where = _chunk_literals(experiment_id, start, end, *chunk)
        select += f" AND it.user_id IN (SELECT imp.user_id FROM impression imp WHERE {where})"
    types = {"user": pa.string(), "item": pa.string(), "event": pa.string(),
             "at": pa.int64()}
    if is_postgresql(conn):
        return _copy_csv(conn, select, INTERACTION_COLUMNS, types)
    rows = _fetch(conn, select, {})
    columns = list(zip(*rows, strict=True)) if rows else [()] * 4
    return pa.table({name: pa.array(col, type=types[name])
                     for name, col in zip(INTERACTION_COLUMNS, columns, strict=True)})


def keyed_interactions(conn: sa.Connection, experiment_id: int, start: int, end: int,
                       low: int, high: int) -> list[tuple]:
    """Interactions that name one of a chunk's impressions: ``(impression id, item,
    event)``, whatever their time."""
    where = _chunk_literals(experiment_id, start, end, low, high)
    join = "JOIN"
    if not is_postgresql(conn):
        # SQLite's planner probes the interactions once per impression of the chunk; when
        # fewer interactions name an impression at all, walking those is cheaper (CROSS
        # JOIN fixes SQLite's loop order)
        keyed = conn.execute(sa.text("SELECT count(*) FROM interaction "
                                     "WHERE impression_key IS NOT NULL")).scalar_one()
        if keyed < high - low + 1:
            join = "CROSS JOIN"
    return _fetch(conn, f"SELECT imp.id, it.item_id, it.event_type FROM interaction it {join} "
                        "impression imp ON imp.impression_key = it.impression_key "
                        f"WHERE it.impression_key IS NOT NULL AND {where}", {})


def day_interaction_pairs(conn: sa.Connection, start: int, end: int):
    """``(item, user)`` of every interaction that occurred in ``[start, end)``, as an Arrow
    table (duplicates removed by the database)."""
    import pyarrow as pa

    select = ("SELECT it.item_id, it.user_id FROM interaction it "
              f"WHERE it.occurred_at >= {int(start)} AND it.occurred_at < {int(end)} "
              "GROUP BY it.item_id, it.user_id")
    types = {"item": pa.string(), "user": pa.string()}
    if is_postgresql(conn):
        return _copy_csv(conn, select, ("item", "user"), types)
    rows = _fetch(conn, select, {})
    columns = list(zip(*rows, strict=True)) if rows else [(), ()]
    return pa.table({"item": pa.array(columns[0], type=pa.string()),
                     "user": pa.array(columns[1], type=pa.string())})
