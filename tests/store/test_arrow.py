"""ArrowReader: query results as Arrow tables, on SQLite (column-folded strings) and on
PostgreSQL (ADBC), with the values that break naive folding and splitting."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest
import sqlalchemy as sa

from tests.conftest import BACKEND
from tracker.errors import SchemaOutdated, StoreError, StoreUnavailable
from tracker.store.arrow import LIST, ArrowReader, json_lists
from tracker.store.db import create_engine

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("name", pa.string()),
                    pa.field("tags", LIST)])

ROWS = [
    (1, "a", ["x", "y"]),
    (2, None, None),
    (3, "", []),
    (4, "b\x1fc", ["p\x1fq", "\x1e", '"', "\\", '","']),  # the separators themselves
    (5, "é🎵\n\r\t", ["", " ", "NULL"]),
    (-6, "last", ["z"]),
]


def _store(engine: sa.Engine, rows: list[tuple]) -> None:
    postgresql = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        kind = "text[]" if postgresql else "TEXT"
        conn.exec_driver_sql(f"CREATE TABLE scratch (id BIGINT, name TEXT, tags {kind})")
        for row_id, name, tags in rows:
            value = tags if postgresql or tags is None else json.dumps(tags)
            conn.execute(sa.text("INSERT INTO scratch VALUES (:id, :name, :tags)"),
                         {"id": row_id, "name": name, "tags": value})


def _read(engine: sa.Engine, where: str = "") -> list[dict]:
    with ArrowReader(engine) as reader:
        table = reader.read(f"SELECT id, name, tags FROM scratch {where} ORDER BY id", SCHEMA)
    assert table.schema == SCHEMA.remove_metadata() or table.schema.types == SCHEMA.types
    return table.to_pylist()


def _expected(rows: list[tuple]) -> list[dict]:
    return [{"id": i, "name": n, "tags": t} for i, n, t in sorted(rows)]


@pytest.mark.parametrize("rows", [
    pytest.param(ROWS[:3] + ROWS[5:], id="plain-values-nulls-and-empties"),
    pytest.param(ROWS, id="values-holding-the-separators-take-the-exact-path"),
    pytest.param([ROWS[1]], id="one-row-all-null"),
    pytest.param([ROWS[2]], id="one-row-empty-string-and-empty-list"),
])
def test_reads_every_value_back(engine, rows):
    _store(engine, rows)
    assert _read(engine) == _expected(rows)


def test_an_empty_result_is_an_empty_table_of_the_schema(engine):
    _store(engine, ROWS)
    with ArrowReader(engine) as reader:
        table = reader.read("SELECT id, name, tags FROM scratch WHERE id > 100", SCHEMA)
    assert table.num_rows == 0 and table.schema.types == SCHEMA.types


def test_null_in_a_field_declared_not_null_is_an_error(engine):
    _store(engine, ROWS)
    strict = pa.schema([pa.field("id", pa.int64(), False),
                        pa.field("name", pa.string(), False)])
    with ArrowReader(engine) as reader, pytest.raises(StoreError, match="name"):
        reader.read("SELECT id, name FROM scratch", strict)


def test_reads_from_several_threads_at_once(engine):
    _store(engine, ROWS)
    with ArrowReader(engine) as reader, ThreadPoolExecutor(4) as pool:
        tables = list(pool.map(
            lambda low: reader.read(f"SELECT id, name, tags FROM scratch WHERE id >= {low} "
                                    "ORDER BY id", SCHEMA).to_pylist(),
            [-10, 2, 4, 5] * 3))
    for low, table in zip([-10, 2, 4, 5] * 3, tables, strict=True):
        assert table == _expected([r for r in ROWS if r[0] >= low])


def test_a_missing_table_says_to_upgrade(engine):
    with ArrowReader(engine) as reader, pytest.raises(SchemaOutdated, match="upgrade"):
        reader.read("SELECT id FROM no_such_table", pa.schema([pa.field("id", pa.int64())]))


def _bound_query(postgresql: bool) -> str:
    """The rows of ``scratch`` whose name is one of ``:names`` and id at least ``:low``."""
    among = "= ANY(CAST(:names AS text[]))" if postgresql else "IN :names"
    return f"SELECT id, name, tags FROM scratch WHERE name {among} AND id >= :low ORDER BY id"


@pytest.mark.parametrize("names", [
    pytest.param(["a", "b\x1fc", "last"], id="plain-and-separator-values"),
    pytest.param(['"', "{x,y}", "NULL", "a,b", "\\", "é🎵\n"], id="array-literal-syntax-in-values"),
    pytest.param([], id="no-value"),
])
def test_parameters_are_bound_not_inlined(engine, names):
    rows = ROWS + [(7, n, [n]) for n in names if n not in {r[1] for r in ROWS}]
    _store(engine, rows)
    with ArrowReader(engine) as reader:
        table = reader.read(_bound_query(engine.dialect.name == "postgresql"), SCHEMA,
                            {"names": pa.array(names, pa.string()), "low": 2})
    got = sorted((r["id"], r["name"], r["tags"]) for r in table.to_pylist())
    assert got == sorted(r for r in rows if r[1] in names and r[0] >= 2)


def test_a_bound_string_is_a_value_never_sql(engine):
    _store(engine, ROWS)
    with ArrowReader(engine) as reader:
        table = reader.read("SELECT id, name, tags FROM scratch WHERE name = :name", SCHEMA,
                            {"name": "a' OR '1'='1"})
    assert table.num_rows == 0


@pytest.mark.skipif(BACKEND != "postgresql", reason="a PostgreSQL server that is not there")
def test_an_unreachable_server_is_unavailable():
    engine = create_engine("postgresql+psycopg://postgres@127.0.0.1:1/test")
    with ArrowReader(engine) as reader, pytest.raises(StoreUnavailable):
        reader.read("SELECT 1 AS x", pa.schema([pa.field("x", pa.int64())]))


@pytest.mark.parametrize("texts", [
    pytest.param(['["a","b"]', "[]", None, '["c"]'], id="minified"),
    pytest.param(['[ "a" , "b" ]', '[\n  "c"\n]'], id="spaced"),
    pytest.param(['["a\\"b"]', '["\\u00e9"]'], id="escapes"),
    pytest.param(['["a\\",\\"b"]', '["x"]'], id="escaped-quote-and-comma-inside-an-item"),
])
def test_json_lists_parse_like_json(texts):
    expected = [None if t is None else json.loads(t) for t in texts]
    assert json_lists(pa.array(texts, type=pa.string())).to_pylist() == expected
