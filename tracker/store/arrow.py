"""Big reads as Arrow tables, without a Python object per row or per value.

The rollup reads millions of served lists and interactions a day; building a Python tuple
per row (and a Python string per item) would cost more than all the metrics. So:

- **PostgreSQL**: an ADBC connection (Apache Arrow's ``adbc-driver-postgresql``, which
  reads the result as a binary ``COPY`` straight into Arrow arrays; ``text[]`` columns
  arrive as ``list<string>``). Measured on 500,000 lists of 10 items: 1.7 s, against 3.2 s
  for ``COPY ... CSV`` parsed by pyarrow and several times that through psycopg rows. It is
  a separate connection from the same URL; reads never write.
- **SQLite**: one aggregate query folds each column into a single string
  (``group_concat``, in SQLite's C code) that pyarrow splits back: a few Python objects per
  column instead of one per value. A string column whose values hold the separator is read
  again row by row (exact, slower); NULLs travel as a separate flag string. JSON list
  columns (how SQLite stores lists) become ``list<string>`` (:func:`json_lists`). (SQLite's
  own ADBC driver links a second copy of the SQLite library into the process, which can
  break the file locks of the first: see sqlite.org/howtocorrupt.html, section 2.2.1.)

Both return the columns with the types asked for, in the query's row order
(:class:`ArrowReader`), and bind the query's ``:name`` parameters (never inlined): an
integer, a string, or an Arrow array, which PostgreSQL takes as one SQL array value
(``unnest(CAST(:users AS text[]))``) and SQLite as a list (``user_id IN :users``), so that
thousands of values cross without a Python object each on PostgreSQL.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from tracker.errors import SchemaOutdated, StoreError, StoreUnavailable, TransientStoreError
from tracker.store.db import retried, transaction, transient_reason

LIST = pa.list_(pa.string())
"""The type of a list column (``text[]`` on PostgreSQL, a JSON array on SQLite)."""

Params = Mapping[str, int | str | pa.Array] | None
"""A query's parameters by name (see the module docstring)."""

_SEPARATOR = "\x1f"  # between values of a string column (SQLite)
_ROWS = "\x1e"  # between the JSON texts of a list column (SQLite)


class ArrowReader:
    """Reads query results as Arrow tables (:meth:`read`), from any thread.

    On PostgreSQL it keeps the ADBC connections it opened, for reuse until :meth:`close`
    (opening one costs ~60 ms: the driver loads the server's type catalog), one per
    concurrent read, each in autocommit mode (no transaction stays open between reads).
    Use as a context manager.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._idle: list = []
        self._lock = threading.Lock()
        self._warming: threading.Thread | None = None
        if engine.dialect.name == "postgresql":  # import the driver and connect meanwhile
            self._warming = threading.Thread(target=self._warm_up, daemon=True)
            self._warming.start()

    def _warm_up(self) -> None:
        try:
            conn = _connect(self.engine.url)
        except Exception:  # the first read connects again and reports it
            return
        with self._lock:
            self._idle.append(conn)

    def __enter__(self) -> ArrowReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._warming is not None:
            self._warming.join()
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def read(self, select: str, columns: pa.Schema, params: Params = None) -> pa.Table:
        """The rows of ``select`` as an Arrow table with the names and types of ``columns``
        (``select``'s columns in that order): ``pa.int64()``, ``pa.string()`` and
        :data:`LIST`, NULL allowed only where the field is nullable. ``params``: the values
        of ``select``'s ``:name`` placeholders (see the module docstring); without them,
        ``select`` is sent as it is (callers inline integers only, never user input)."""
        if self.engine.dialect.name != "postgresql":
            def read_sqlite() -> pa.Table:
                with transaction(self.engine) as conn:
                    return _read_sqlite(conn, select, columns, params)
            return retried(self.engine, read_sqlite)
        if self._warming is not None:
            self._warming.join()
        bound = _numbered(select, params) if params else (select, None)
        table = retried(self.engine, lambda: self._read_postgresql(*bound))
        table = table.rename_columns(columns.names)
        for field in columns:
            if not field.nullable and table[field.name].null_count:
                raise _null_in(field)
        return _typed(table, columns)

    def _read_postgresql(self, select: str, params: pa.RecordBatch | None) -> pa.Table:
        """One attempt of a read on an idle ADBC connection (or a new one)."""
        with _adbc_errors():
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = _connect(self.engine.url)
            try:
                with conn.cursor() as cursor:
                    cursor.execute(select, params)
                    table = cursor.fetch_arrow_table()
            except BaseException:
                conn.close()  # in an unknown state: not reused
                raise
            with self._lock:
                self._idle.append(conn)
        return table


# ------------------------------------------------------------------ PostgreSQL


def adbc_uri(url: sa.URL) -> str:
    """The libpq URI of a SQLAlchemy PostgreSQL URL (driver name dropped, query kept).

    >>> adbc_uri(sa.make_url("postgresql+psycopg://u:p%40ss@h:5433/db?options=-csearch_path%3Dx"))
    'postgresql://u:p%40ss@h:5433/db?options=-csearch_path%3Dx'
    """
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def _numbered(select: str, params: Mapping) -> tuple[str, pa.RecordBatch]:
    """``select`` with PostgreSQL's ``$n`` placeholders for its ``:name`` ones, and their
    values as one row of Arrow columns (an array as one list value), which ADBC binds."""
    from sqlalchemy.dialects import postgresql

    compiled = sa.text(select).compile(dialect=postgresql.dialect(paramstyle="numeric_dollar"))
    row = {}
    for name in compiled.positiontup:
        value = params[name]
        if isinstance(value, pa.Array | pa.ChunkedArray):
            value = value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value
            row[name] = pa.ListArray.from_arrays(pa.array([0, len(value)], pa.int32()), value)
        else:
            row[name] = pa.array([value], pa.string() if isinstance(value, str) else pa.int64())
    return compiled.string, pa.record_batch(row)


def _connect(url: sa.URL):
    import adbc_driver_postgresql.dbapi as adbc

    conn = adbc.connect(adbc_uri(url), autocommit=True)
    with conn.cursor() as cursor:
        cursor.execute("SET jit = off")  # compiling costs more than it saves here
    return conn


@contextmanager
def _adbc_errors() -> Iterator[None]:
    """ADBC's errors as the project's, by the same rules as :func:`tracker.store.db.translate`
    (transient ones first, so that :func:`~tracker.store.db.retried` reads again)."""
    import adbc_driver_manager

    try:
        yield
    except adbc_driver_manager.Error as error:
        raise _adbc_error(error, adbc_driver_manager.OperationalError) from error


def _adbc_error(error: Exception, operational: type) -> StoreError:
    text = _first_line(error)
    reason = transient_reason(error)
    if reason is not None:
        return TransientStoreError(f"{reason}: {text}")
    if isinstance(error, operational):
        return StoreUnavailable(f"database unavailable: {text}")
    if "does not exist" in text:
        return SchemaOutdated(f"{text}: the database schema is behind; run `tracker db upgrade`")
    return StoreError(f"database error: {text}")


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0]


def _typed(table: pa.Table, columns: pa.Schema) -> pa.Table:
    return pa.table({f.name: table[f.name] if table[f.name].type == f.type
                     else table[f.name].cast(f.type) for f in columns})


# ------------------------------------------------------------------ SQLite


def _execute(conn: sa.Connection, query: str, params: Params) -> sa.CursorResult:
    """``query`` with its parameters bound (an Arrow array as an expanding list)."""
    if not params:
        return conn.exec_driver_sql(query)
    values = {name: value.to_pylist() if isinstance(value, pa.Array | pa.ChunkedArray)
              else value if isinstance(value, str) else int(value)  # numpy's ints too
              for name, value in params.items()}
    lists = [sa.bindparam(name, expanding=True) for name, value in params.items()
             if isinstance(value, pa.Array | pa.ChunkedArray)]
    return conn.execute(sa.text(query).bindparams(*lists), values)


def _read_sqlite(conn: sa.Connection, select: str, columns: pa.Schema,
                 params: Params = None) -> pa.Table:
    query = f"WITH q({', '.join(f'c{i}' for i in range(len(columns)))}) AS ({select}) "
    folds = ["count(*)"]
    for i, field in enumerate(columns):
        if field.type == pa.int64():
            folds.append(f"group_concat(coalesce(c{i}, 0), ',')")
        else:
            separator = "char(30)" if field.type == LIST else "char(31)"
            folds.append(f"group_concat(coalesce(c{i}, ''), {separator})")
        folds.append(f"group_concat(c{i} IS NULL, '')" if field.nullable else f"count(c{i})")
    row = iter(_execute(conn, f"{query}SELECT {', '.join(folds)} FROM q", params).one())
    count = int(next(row))
    if count == 0:
        return columns.empty_table()
    out = {}
    for field in columns:
        text, nulls = next(row), next(row)
        if not field.nullable:
            if nulls != count:
                raise _null_in(field)
            nulls = ""
        if field.type == pa.int64():
            values = pc.cast(_split(text, ","), pa.int64())
        else:
            values = _split(text, _ROWS if field.type == LIST else _SEPARATOR)
            if len(values) != count:  # some value holds the separator: the exact path
                return _read_rows(conn, f"{query}SELECT * FROM q", columns, params)
        if "1" in nulls:  # one flag per row, "1" where the value is NULL
            flags = pa.Array.from_buffers(pa.uint8(), count, [None, pa.py_buffer(nulls.encode())])
            values = pc.if_else(pc.equal(flags, ord("1")), pa.scalar(None, type=values.type),
                                values)
        out[field.name] = json_lists(values) if field.type == LIST else values
    return pa.table(out)


def _null_in(field: pa.Field) -> StoreError:
    return StoreError(f"column {field.name!r} holds NULL where a value is required")


def _read_rows(conn: sa.Connection, select: str, columns: pa.Schema,
               params: Params = None) -> pa.Table:
    """The slow, exact path: every row through the driver."""
    rows = _execute(conn, select, params).all()
    out = {}
    for i, field in enumerate(columns):
        values = pa.array([r[i] for r in rows],
                          type=pa.int64() if field.type == pa.int64() else pa.string())
        if not field.nullable and values.null_count:
            raise _null_in(field)
        out[field.name] = json_lists(values) if field.type == LIST else values
    return pa.table(out)


def _split(text: str, separator: str) -> pa.Array:
    return pc.split_pattern(pa.array([text], type=pa.large_string()), separator) \
        .flatten().cast(pa.string())


def json_lists(texts: pa.Array) -> pa.Array:
    """JSON arrays of strings (SQLite's stored lists) as ``list<string>``; null stays null.

    Fast path, when no text holds a backslash and each is ``[]`` or starts with ``["`` and
    ends with ``"]``: strip the brackets and split on ``","``, then check that every list
    has as many items as it has quotes / 2 (so any other spacing is caught). Otherwise every
    array is parsed.

    >>> json_lists(pa.array(['["a","b"]', '[]', None, '[ "c" ]'])).to_pylist()
    [['a', 'b'], [], None, ['c']]
    """


    if len(texts) == 0:
        return pa.array([], type=LIST)
    if not pc.any(pc.match_substring(texts, "\\")).as_py():
        inner = pc.utf8_slice_codeunits(texts, 2, -2)  # '["a","b"]' -> 'a","b'
        empty = pc.equal(texts, "[]")
        lists = pc.if_else(empty, pa.scalar([], type=LIST), pc.split_pattern(inner, '","'))
        shaped = pc.or_(empty, pc.and_(pc.starts_with(texts, '["'), pc.ends_with(texts, '"]')))
        counted = pc.equal(pc.multiply(pc.list_value_length(lists), 2),
                           pc.count_substring(texts, '"'))
        if pc.all(pc.and_(shaped, counted)).as_py() is not False:
            return lists
    return pa.array([None if t is None else json.loads(t) for t in texts.to_pylist()],
                    type=LIST)
