"""Malformed import files through `tracker import`: each ends with a message naming the file and
the line (or record, or row), exit status 2 and the summary; the valid records around a bad line
are stored; a file that cannot be read at all stores nothing."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import count, impression, interaction, stored_impressions
from tracker.cli import main
from tracker.errors import FileError
from tracker.ingest.files import HEAD_BYTES, file_records
from tracker.ingest.validate import Unreadable
from tracker.store.db import create_engine

COLUMNS = ["impression_id", "experiment", "arm", "user_id", "items", "scores", "served_at"]


def run(url: str, *args: str, code: int = 0):
    result = CliRunner().invoke(main, list(args), env={"TRACKER_DATABASE_URL": url})
    assert result.exit_code == code, result.output
    return result


@pytest.fixture
def home(db_url) -> str:
    run(db_url, "experiments", "create", "home", "--arm", "control", "--arm", "treatment")
    return db_url


def stored_ids(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(stored_impressions(engine))
    finally:
        engine.dispose()


def json_line(i: int) -> str:
    record = impression(i)
    record["served_at"] = record["served_at"].isoformat()
    return json.dumps(record)


def csv_text(records: list[int], header: list[str] = COLUMNS) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for i in records:
        r = impression(i)
        row = {**r, "items": "|".join(r["items"]), "scores": "|".join(map(str, r["scores"])),
               "served_at": r["served_at"].isoformat()}
        writer.writerow([row.get(name, "x") for name in header])
    return out.getvalue()


def padding(fmt: str) -> tuple[list[str], int]:
    """Valid lines filling more than the checked head of a file, and how many they are, so
    that what follows them is read line by line."""
    lines: list[str] = []
    size, i = 0, 100
    while size <= HEAD_BYTES:
        line = json_line(i) if fmt == "jsonl" else csv_text([i]).splitlines()[1]
        lines.append(line)
        size += len(line) + 1
        i += 1
    return lines, len(lines)


# ------------------------------------------------------- a bad line among good ones
@dataclass(frozen=True)
class BadLine:
    """A file whose line ``line`` is bad and whose other lines hold ``stored`` impressions."""

    name: str
    content: bytes
    line: int
    says: str
    stored: set[str]


def truncated_jsonl() -> BadLine:
    cut = '{"impression_id": "imp-9", "experim'
    text = "\n".join([json_line(0), "", cut, json_line(2)])
    column = cut.index('"experim') + 1
    return BadLine("x.jsonl", text.encode() + b"\n", 3,
                   f"not valid JSON (Unterminated string starting at column {column}); each "
                   "line must be one JSON object",
                   {"imp-0", "imp-2"})


def jsonl_line_not_an_object() -> BadLine:
    text = "\n".join([json_line(0), "[1, 2]", json_line(2)]) + "\n"
    return BadLine("x.ndjson", text.encode(), 2, "a record must be a mapping", {"imp-0", "imp-2"})


def jsonl_changing_encoding() -> BadLine:
    lines, n = padding("jsonl")
    bad = json_line(0).replace("item-0-1", "caf\xe9").encode("latin-1")
    content = ("\n".join(lines) + "\n").encode() + bad + b"\n" + json_line(2).encode() + b"\n"
    ids = {f"imp-{100 + k}" for k in range(n)} | {"imp-2"}
    return BadLine("x.jsonl", content, n + 1, "not UTF-8 text (byte 0xe9 at column", ids)


def csv_extra_value() -> BadLine:
    text = csv_text([0, 1, 2]).splitlines()
    text[2] += ",surplus"
    return BadLine("x.csv", ("\n".join(text) + "\n").encode(), 3,
                   "8 values for the 7 columns of the header", {"imp-0", "imp-2"})


def csv_missing_value() -> BadLine:
    text = csv_text([0, 1, 2]).splitlines()
    text[3] = text[3].rpartition(",")[0]
    return BadLine("x.csv", ("\n".join(text) + "\n").encode(), 4,
                   "6 values for the 7 columns of the header", {"imp-0", "imp-1"})


def csv_quoted_newline_then_bad() -> BadLine:
    lines = csv_text([0, 1, 2]).splitlines()
    lines[1] = lines[1].replace(",u0,", ',"u\n0",', 1)  # the first row spans lines 2-3
    lines[3] = lines[3].replace("imp-2", "imp-2,extra")
    text = "\n".join(lines) + "\n"
    return BadLine("x.csv", text.encode(), 5, "8 values for the 7 columns", {"imp-0", "imp-1"})


def csv_changing_encoding() -> BadLine:
    lines, n = padding("csv")
    bad = csv_text([0]).splitlines()[1].replace("u0", "caf\xe9").encode("latin-1")
    content = ("\n".join([",".join(COLUMNS), *lines]) + "\n").encode() + bad + b"\n"
    content += csv_text([2]).splitlines()[1].encode() + b"\n"
    ids = {f"imp-{100 + k}" for k in range(n)} | {"imp-2"}
    return BadLine("x.csv", content, n + 2, "not UTF-8 text (byte 0xe9 at column", ids)


@pytest.mark.parametrize("make", [
    pytest.param(truncated_jsonl, id="truncated-jsonl-line-is-one-rejection-by-its-line"),
    pytest.param(jsonl_line_not_an_object, id="jsonl-line-holding-an-array-is-one-rejection"),
    pytest.param(jsonl_changing_encoding, id="latin1-line-after-utf8-lines-is-one-rejection"),
    pytest.param(csv_extra_value, id="csv-row-with-an-extra-value-is-one-rejection"),
    pytest.param(csv_missing_value, id="csv-row-missing-a-value-is-one-rejection"),
    pytest.param(csv_quoted_newline_then_bad,
                 id="csv-line-numbers-count-quoted-newlines"),
    pytest.param(csv_changing_encoding, id="csv-encoding-changing-mid-way-rejects-that-row"),
])
def test_a_bad_line_is_one_rejection_named_by_file_and_line_and_its_neighbours_are_stored(
        home, tmp_path, make: Callable[[], BadLine]):
    case = make()
    path = tmp_path / case.name
    path.write_bytes(case.content)
    result = run(home, "import", "impressions", str(path), code=2)
    rejected = [line for line in result.stdout.splitlines() if "rejected " in line
                and line.startswith("  ")]
    assert len(rejected) == 1 and f"{path} line {case.line}: " in rejected[0], result.output
    assert case.says in rejected[0]
    assert f"{len(case.stored)} stored, 0 duplicates, 0 conflicts, 1 rejected" in result.stdout
    assert stored_ids(home) == case.stored


def test_json_output_says_where_each_rejection_is(home, tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(truncated_jsonl().content)
    out = json.loads(run(home, "import", "impressions", str(path), "--format", "json",
                         code=2).stdout)
    assert [(r["index"], r["where"]) for r in out["rejected"]] == [(1, "line 3")]
    assert (out["stored"], out["errors"]) == (2, [])


# ------------------------------------------------------- a file that cannot be read
def parquet_bytes(columns: dict | None = None) -> bytes:
    records = [impression(i) for i in range(3)]
    table = pa.table(columns or {k: [r[k] for r in records] for k in records[0]})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


UNREADABLE = [
    pytest.param("x.jsonl", b"", [], "the file is empty (0 bytes)", id="empty-jsonl"),
    pytest.param("x.csv", b"", [], "the file is empty (0 bytes)", id="empty-csv"),
    pytest.param("x.csv", b" \n\n", [], "holds only blank space", id="blank-csv"),
    pytest.param("x.csv", csv_text([]).encode(), [], "holds a header and no records",
                 id="header-only-csv"),
    pytest.param("x.jsonl", (json_line(0) + "\n").replace("u0", "caf\xe9").encode("latin-1"),
                 [], "line 1: not UTF-8 text (byte 0xe9 at offset",
                 id="latin1-jsonl-says-the-accepted-encodings"),
    pytest.param("x.csv", csv_text([0, 1]).encode("utf-16-le"), [],
                 "not text: byte 1 is NUL (a binary file, or UTF-16 or UTF-32 without a byte "
                 "order mark); accepted: UTF-8", id="utf16-without-bom"),
    pytest.param("x.jsonl", bytes(range(256)) * 4, [], "is NUL", id="binary-file"),
    pytest.param("x.parquet", parquet_bytes()[:-40], [], "not a readable Parquet file",
                 id="truncated-parquet"),
    pytest.param("x.parquet", b"PAR1" + bytes(200), [], "not a readable Parquet file",
                 id="corrupt-parquet"),
    pytest.param("x.csv", csv_text([0], header=[c for c in COLUMNS if c != "served_at"]).encode(),
                 [], "line 1: missing served_at. Impressions have the columns",
                 id="csv-header-missing-a-required-column"),
    pytest.param("x.csv", csv_text([0], header=[*COLUMNS, "colour"]).encode(), [],
                 "line 1: unknown header column(s) colour",
                 id="csv-header-with-an-unknown-column"),
    pytest.param("x.csv", csv_text([0], header=[*COLUMNS, "arm"]).encode(), [],
                 "line 1: header column(s) 'arm' given twice",
                 id="csv-header-naming-a-column-twice"),
    pytest.param("x.parquet", parquet_bytes({"impression_id": ["a"], "colour": ["red"]}), [],
                 "unknown column(s) colour; missing arm, experiment, items, served_at, user_id",
                 id="parquet-with-unknown-and-missing-columns"),
    pytest.param("x.json", ("[\n" + json_line(0) + "\n" + json_line(1) + "\n]").encode(), [],
                 "line 3: not valid JSON (Expecting ',' delimiter at column 1)",
                 id="json-array-cut-short-stores-nothing"),
    pytest.param("x.csv", b"PAR1" + bytes(200), [], "the content is Parquet, not CSV",
                 id="parquet-content-named-csv"),
    pytest.param("x.csv", (json_line(0) + "\n").encode(), [],
                 "the content looks like JSON (a .jsonl or .json file), not CSV",
                 id="json-lines-named-csv"),
    pytest.param("x.jsonl", b"[" + json_line(0).encode() + b"]", [],
                 "the content looks like a JSON array (a .json file), not JSON Lines",
                 id="json-array-named-jsonl"),
    pytest.param("x.txt", csv_text([0]).encode(), ["--input-format", "parquet"],
                 "not a Parquet file (it does not start with PAR1; it looks like text)",
                 id="format-parquet-on-csv-content"),
    pytest.param("x.txt", csv_text([0]).encode(), ["--input-format", "jsonl"],
                 "the content looks like text starting with 'impression_id,experiment,arm,",
                 id="format-jsonl-on-csv-content"),
]


@pytest.mark.parametrize(("name", "content", "options", "says"), UNREADABLE)
def test_a_file_that_cannot_be_read_is_named_with_what_is_wrong_and_stores_nothing(
        home, tmp_path, name, content, options, says):
    path = tmp_path / name
    path.write_bytes(content)
    result = run(home, "import", "impressions", str(path), *options, code=2)
    assert f"Error: {path}: " in result.stderr and says in result.stderr, result.stderr
    assert "impressions: 0 received, 0 stored, 0 duplicates, 0 conflicts, 0 rejected; " \
           "nothing stored" in result.stdout
    assert stored_ids(home) == set()


def test_a_file_error_in_json_output_is_listed_under_errors(home, tmp_path):
    path = tmp_path / "x.csv"
    path.write_bytes(b"")
    out = json.loads(run(home, "import", "impressions", str(path), "--format", "json",
                         code=2).stdout)
    assert out["stored"] == 0 and out["errors"] == [f"{path}: the file is empty (0 bytes); "
                                                    "nothing to import"]


def test_a_parquet_row_group_that_cannot_be_decoded_is_named_and_the_others_are_stored(
        home, tmp_path):
    records = [impression(i) for i in range(6)]
    table = pa.table({k: [r[k] for r in records] for k in records[0]})
    path = tmp_path / "x.parquet"
    pq.write_table(table, path, row_group_size=3, compression="snappy")
    data = bytearray(path.read_bytes())
    group = pq.ParquetFile(path).metadata.row_group(1)
    for c in range(group.num_columns):  # scribble over the second group's pages
        column = group.column(c)
        start = column.data_page_offset + 10
        data[start:start + 16] = b"\xff" * 16
    path.write_bytes(bytes(data))
    result = run(home, "import", "impressions", str(path), code=2)
    assert f"Error: {path} row group 1 (rows 4-6): cannot be read" in result.stderr
    assert "3 stored" in result.stdout
    assert stored_ids(home) == {"imp-0", "imp-1", "imp-2"}


@pytest.mark.parametrize("target", [
    pytest.param("missing.csv", id="a-missing-path"),
    pytest.param(".", id="a-directory"),
])
def test_a_path_that_cannot_be_opened_is_a_file_error_naming_it(tmp_path, target):
    path = tmp_path / target
    with pytest.raises(FileError, match="cannot be opened") as raised:
        file_records(path, "csv", kind="impressions")
    assert str(raised.value).startswith(f"{path}: cannot be opened (")


# ------------------------------------------------------- readable encodings and JSON
@pytest.mark.parametrize(("name", "content"), [
    pytest.param("x.jsonl", b"\xef\xbb\xbf" + "\n".join(map(json_line, range(3))).encode(),
                 id="utf8-with-bom-jsonl"),
    pytest.param("x.csv", b"\xef\xbb\xbf" + csv_text([0, 1, 2]).encode(), id="utf8-with-bom-csv"),
    pytest.param("x.csv", csv_text([0, 1, 2]).encode("utf-16"), id="utf16-with-bom-csv"),
    pytest.param("x.jsonl", "\n".join(map(json_line, range(3))).encode("utf-16"),
                 id="utf16-with-bom-jsonl"),
    pytest.param("x.json", ("[" + ",\n".join(map(json_line, range(3))) + "]").encode(),
                 id="json-array-of-objects"),
    pytest.param("x.json", "\n".join(map(json_line, range(3))).encode(),
                 id="json-lines-saved-as-json"),
])
def test_accepted_encodings_and_json_arrays_store_every_record(home, tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    assert "3 received, 3 stored" in run(home, "import", "impressions", str(path)).stdout
    assert stored_ids(home) == {"imp-0", "imp-1", "imp-2"}


def test_a_json_file_may_hold_one_object(home, tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps(json.loads(json_line(4)), indent=2))
    assert "1 stored" in run(home, "import", "impressions", str(path)).stdout
    assert stored_ids(home) == {"imp-4"}


def test_a_json_array_element_that_is_not_an_object_is_one_rejection_by_record(home, tmp_path):
    path = tmp_path / "x.json"
    path.write_text(f"[{json_line(0)}, 7, {json_line(2)}]")
    result = run(home, "import", "impressions", str(path), code=2)
    assert f"  rejected {path} record 2: a record must be a mapping" in result.stdout
    assert stored_ids(home) == {"imp-0", "imp-2"}
    engine = create_engine(home)
    assert count(engine, "impression") == 2
    engine.dispose()


# ------------------------------------------------------- options
@pytest.mark.parametrize(("args", "says"), [
    pytest.param(["import", "impressions", "FILE", "--show-rejected", "-1"],
                 "Invalid value for '--show-rejected'", id="negative-show-rejected"),
    pytest.param(["rollup", "--every", "soon"], "Invalid value for '--every': 'soon': expected",
                 id="rollup-every-without-a-unit-names-the-option"),
    pytest.param(["rollup", "--every", "0s"], "Invalid value for '--every': '0s': expected",
                 id="rollup-every-zero-names-the-option"),
])
def test_bad_options_are_usage_errors_naming_the_option(home, tmp_path, args, says):
    path = tmp_path / "x.jsonl"
    path.write_text(json_line(0) + "\n")
    result = run(home, *[str(path) if a == "FILE" else a for a in args], code=2)
    assert says in result.output
    assert stored_ids(home) == set()


# ------------------------------------------------------- where each record came from
LINES = st.lists(st.sampled_from(["good", "blank", "garbage", "array"]), min_size=1,
                 max_size=30)


@settings(max_examples=60, deadline=None)
@given(kinds=LINES)
def test_every_non_blank_jsonl_line_is_one_record_that_knows_its_line(tmp_path_factory, kinds):
    text = {"good": json_line(0), "blank": "  ", "garbage": '{"a": tru', "array": "[1]"}
    lines = [text[k] for k in kinds]
    path = tmp_path_factory.mktemp("lines") / "x.jsonl"
    path.write_text("{}\n" + "\n".join(lines) + "\n")  # a first object line, as files start
    records = file_records(path, "jsonl")
    read = list(records)
    expected = [n for n, k in enumerate(kinds, 2) if k != "blank"]
    assert len(read) == len(expected) + 1
    assert [records.where(i) for i in range(1, len(read))] == [f"line {n}" for n in expected]


@settings(max_examples=40, deadline=None)
@given(spans=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=15))
def test_csv_records_know_their_first_line_across_quoted_newlines(tmp_path_factory, spans):
    header = ["impression_id", "user_id"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for n, breaks in enumerate(spans):
        writer.writerow([f"imp-{n}", "u" + "\n" * breaks])
    path = tmp_path_factory.mktemp("csv") / "x.csv"
    path.write_text(out.getvalue())
    records = file_records(path, "csv")
    read = list(records)
    starts = [2 + sum(s + 1 for s in spans[:n]) for n in range(len(spans))]
    assert [r["impression_id"] for r in read] == [f"imp-{n}" for n in range(len(spans))]
    assert [records.where(i) for i in range(len(read))] == [f"line {s}" for s in starts]


# ------------------------------------------------------- interactions
def event_line(i: int) -> str:
    record = interaction(i)
    record["occurred_at"] = record["occurred_at"].isoformat()
    return json.dumps(record)


def stored_events(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return set(conn.exec_driver_sql("SELECT event_key FROM interaction").scalars())
    finally:
        engine.dispose()


def test_interactions_a_truncated_line_is_one_rejection_and_its_neighbours_are_stored(
        home, tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join([event_line(0), event_line(1)[:30], event_line(2)]) + "\n")
    result = run(home, "import", "interactions", str(path), code=2)
    assert f"  rejected {path} line 2: not valid JSON (" in result.stdout
    assert "2 stored, 0 duplicates, 0 conflicts, 1 rejected" in result.stdout
    assert stored_events(home) == {"evt-0", "evt-2"}


def test_interactions_csv_header_is_checked_against_the_interaction_fields(home, tmp_path):
    path = tmp_path / "events.csv"
    path.write_text("event_id,user_id,item_id,event,served_at\ne1,u1,i1,click,"
                    "2026-11-01T12:00:00Z\n")
    result = run(home, "import", "interactions", str(path), code=2)
    assert (f"Error: {path}: line 1: unknown header column(s) served_at; missing occurred_at. "
            "Interactions have the columns event, event_id, item_id, occurred_at, user_id and "
            "optionally impression_id, value") in result.stderr
    assert stored_events(home) == set()


# ------------------------------------------------------- any bytes at all
VALID = {"jsonl": "\n".join(map(json_line, range(3))).encode(),
         "json": ("[" + ",".join(map(json_line, range(3))) + "]").encode(),
         "csv": csv_text([0, 1, 2]).encode(), "parquet": parquet_bytes()}


def read_all(path, fmt: str) -> list:
    """Every record of a file, or the FileError that refuses it."""
    try:
        records = file_records(path, fmt, kind="impressions")
        return list(records)
    except FileError as error:
        assert str(error).startswith(f"{path}: ")
        return []


@settings(max_examples=150, deadline=None)
@given(fmt=st.sampled_from(sorted(VALID)), data=st.data())
def test_any_damage_to_a_file_is_a_file_error_or_records_never_another_exception(
        tmp_path_factory, fmt, data):
    content = bytearray(VALID[fmt])
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        at = data.draw(st.integers(0, len(content)), label="at")
        cut = data.draw(st.integers(0, 8), label="cut")
        content[at:at + cut] = data.draw(st.binary(max_size=8), label="bytes")
    path = tmp_path_factory.mktemp("damaged") / f"x.{fmt}"
    path.write_bytes(bytes(content))
    for record in read_all(path, fmt):
        assert isinstance(record, (dict, list, str, int, float, bool, Unreadable)) or \
            record is None
