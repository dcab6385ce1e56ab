"""Import files (CSV, JSON, JSON Lines, Parquet) as record streams that know where each record
came from.

A file is checked before any record is read, so that a file that cannot be imported at all
stores nothing: it raises :class:`~tracker.errors.FileError` naming the file, what is wrong and
what is accepted. The rules:

- the file is not empty and its content matches the format (from ``--format`` or the
  extension): Parquet starts with ``PAR1``; a ``.jsonl``/``.ndjson`` file's first character is
  ``{``; a ``.json`` file's is ``[`` or ``{``; a CSV file's is neither;
- text is UTF-8, with or without a byte order mark, or UTF-16 with a byte order mark (the BOM
  says which). The first 64 KiB are checked whole: a NUL byte there (a binary file, UTF-16
  without a BOM) or bytes that are not UTF-8 make the file unreadable. A later line that is not
  UTF-8 (an encoding that changes mid-way) is one rejected record;
- a CSV header names each column once, only fields of the record kind, and every required one;
  a header-only CSV holds no records and is refused like an empty file;
- a ``.json`` file holds one JSON array of objects, or one object, and is parsed whole: a
  syntax error anywhere stores nothing. That takes about eight times the file's size in memory
  (measured: 220 MB for a 28 MB file of 100,000 impressions; ijson is not a dependency), so
  large files are better JSON Lines. A ``.json`` file holding JSON Lines is read as such;
- a Parquet file has a readable footer (a truncated or corrupt file stores nothing).

Within a readable file a bad line (JSON that does not parse, a CSV row with too many or too
few values, bytes that are not UTF-8) is one :class:`~tracker.ingest.validate.Unreadable`
record that validation rejects like any bad record; the lines around it are stored. A Parquet
row group that cannot be decoded is skipped and named in :attr:`FileRecords.problems`.
"""

from __future__ import annotations

import bisect
import codecs
import contextlib
import csv
import io
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracker.errors import FileError, shorten
from tracker.ingest.result import Rejection
from tracker.ingest.validate import IMPRESSION_FIELDS, INTERACTION_FIELDS, Unreadable

TIME_FIELDS = ("served_at", "occurred_at")
LIST_FIELDS = ("items", "scores", "baseline_items")
FORMATS = ("csv", "json", "jsonl", "parquet")
ENCODINGS = "UTF-8 (with or without a byte order mark) or UTF-16 with a byte order mark"
NUL = b"\x00"
HEAD_BYTES = 64 * 1024
"""How much of a file is checked whole before reading (encoding, binary content, format)."""

FIELDS = {"impressions": IMPRESSION_FIELDS, "interactions": INTERACTION_FIELDS}
OPTIONAL = {"impressions": frozenset({"scores", "baseline_items", "context"}),
            "interactions": frozenset({"value", "impression_id"})}
_SUFFIXES = {".csv": "csv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl",
             ".parquet": "parquet", ".pq": "parquet"}
_WHAT = {"csv": "CSV", "json": "JSON", "jsonl": "JSON Lines", "parquet": "Parquet"}
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))



def _missing(value: Any) -> bool:
    """None or a float NaN: a value that is not there."""
    return value is None or (type(value) is float and math.isnan(value))


with contextlib.suppress(OverflowError):  # a served list may be a long cell
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def detect_format(path: Path, fmt: str | None) -> str:
    """``fmt`` when given, else the format the file's extension names."""
    if fmt:
        if fmt not in FORMATS:
            raise FileError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
        return fmt
    found = _SUFFIXES.get(path.suffix.lower())
    if found is None:
        raise FileError(f"cannot tell the format of {path.name}: name it .csv, .json, .jsonl, "
                        f".ndjson or .parquet, or use --input-format ({', '.join(FORMATS)})")
    return found


def count_records(path: Path, fmt: str) -> int:
    """How many records a file holds (for progress bars), without parsing them."""
    return FileRecords(path, fmt).size_hint()


class _Origins:
    """Where each record came from (a line or a row number), stored as the few points where
    ``number - index`` changes, so a file of millions of records costs a handful of ints."""

    def __init__(self) -> None:
        self.indexes: list[int] = []
        self.deltas: list[int] = []

    def add(self, index: int, number: int) -> None:
        delta = number - index
        if not self.deltas or self.deltas[-1] != delta:
            self.indexes.append(index)
            self.deltas.append(delta)

    def number(self, index: int) -> int:
        at = bisect.bisect_right(self.indexes, index) - 1
        return index + (self.deltas[at] if at >= 0 else 1)


class FileRecords:
    """The records of one import file, checked on opening (see the module's rules) and read
    as a stream on iteration.

    ``kind`` (``"impressions"`` or ``"interactions"``), when given, lets the CSV header and the
    Parquet columns be checked against the record's fields. After iterating, :meth:`where`
    says where a record index came from and :attr:`problems` lists what could not be read at
    all (a Parquet row group).
    """

    def __init__(self, path: Path, fmt: str, *, kind: str | None = None,
                 chunk_rows: int = 50_000):
        self.path = Path(path)
        self.fmt = fmt
        self.kind = kind
        self.chunk_rows = chunk_rows
        self.problems: list[str] = []
        self._origins = _Origins()
        self._array: list | None = None
        self._encoding = "utf-8"
        self._open()

    # -------------------------------------------------------------- checks on opening
    def _fail(self, what: str) -> FileError:
        return FileError(f"{self.path}: {what}")

    def _open(self) -> None:
        try:
            with self.path.open("rb") as handle:
                head = handle.read(HEAD_BYTES)
                whole = len(head) < HEAD_BYTES
        except OSError as error:  # missing, a directory, no permission
            raise self._fail(f"cannot be opened ({error.strerror or error}); give the path of "
                             "a readable file") from None
        if not head:
            raise self._fail("the file is empty (0 bytes); nothing to import")
        is_parquet = head.startswith(b"PAR1")
        if self.fmt == "parquet" or is_parquet:
            self._open_parquet(is_parquet, head)
            return
        text = self._decode_head(head, whole)
        first = text.lstrip()[:1]
        if not first:
            raise self._fail("the file holds only blank space; nothing to import")
        self._check_content(first, text)
        if self.fmt == "csv":
            self._open_csv()
        elif self.fmt == "json":
            self._open_json()

    def _decode_head(self, head: bytes, whole: bool) -> str:
        for bom, encoding in _BOMS:
            if head.startswith(bom):
                self._encoding = encoding
                break
        else:
            if NUL in head:
                at = head.index(NUL)
                raise self._fail(f"not text: byte {at} is NUL (a binary file, or UTF-16 or "
                                 f"UTF-32 without a byte order mark); accepted: {ENCODINGS}")
        decoder = codecs.getincrementaldecoder(self._encoding)()
        try:
            return decoder.decode(head, final=whole)
        except UnicodeDecodeError as error:
            line = head[:error.start].count(b"\n") + 1
            raise self._fail(f"line {line}: not {self._encoding.upper().removesuffix('-SIG')} "
                             f"text (byte 0x{head[error.start]:02x} at offset {error.start}); "
                             f"accepted: {ENCODINGS}. Convert it first, e.g. "
                             "`iconv -f latin1 -t utf-8`") from None

    def _check_content(self, first: str, text: str) -> None:
        """The first character must fit the format; say which format the content looks like."""
        fits = {"csv": first not in "[{", "json": first in "[{", "jsonl": first == "{"}
        if fits[self.fmt]:
            return
        looks = ("a JSON array (a .json file)" if first == "[" else
                 "JSON (a .jsonl or .json file)" if first == "{" else
                 f"text starting with {shorten(text.lstrip().splitlines()[0], 40)!r} "
                 "(a .csv file?)")
        raise self._fail(f"the content looks like {looks}, not {_WHAT[self.fmt]}; name the file "
                         "by its format or pass --format csv|json|jsonl|parquet")

    def _open_parquet(self, is_parquet: bool, head: bytes) -> None:
        if not is_parquet:
            text = "" if NUL in head[:512] else "; it looks like text"
            raise self._fail(f"not a Parquet file (it does not start with PAR1{text}); "
                             "--format parquet expects a Parquet file")
        if self.fmt != "parquet":
            raise self._fail(f"the content is Parquet, not {_WHAT[self.fmt]}; name it .parquet "
                             "or pass --format parquet")
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            self._parquet = pq.ParquetFile(self.path)
        except (pa.ArrowException, OSError, ValueError) as error:
            raise self._fail(f"not a readable Parquet file ({shorten(str(error), 200)}); is it "
                             "truncated? Nothing was imported") from None
        self._check_columns(self._parquet.schema_arrow.names, "column")

    def _open_csv(self) -> None:
        with self._text() as handle:
            reader = csv.reader(handle)
            try:
                header = next(reader, None)
            except csv.Error as error:
                raise self._fail(f"line {reader.line_num}: the header is not valid CSV "
                                 f"({error}); nothing to import") from None
            header_line = reader.line_num
            try:
                rows = any(row for row in reader)
            except csv.Error:
                rows = True  # a record, that reading will reject with its line
        if not header or not any(cell.strip() for cell in header):
            raise self._fail("the first line is not a CSV header; nothing to import")
        self._check_columns(header, "header column", header_line)
        if not rows:
            raise self._fail("the file holds a header and no records; nothing to import")

    def _check_columns(self, names: list[str], what: str, line: int | None = None) -> None:
        """Each column once; with a known kind, only its fields and every required one."""
        where = f"line {line}: " if line else ""
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise self._fail(f"{where}{what}(s) {', '.join(map(repr, twice))} given twice; "
                             "name each column once")
        if self.kind is None:
            return
        known = FIELDS[self.kind]
        unknown = [n for n in names if n not in known]
        missing = sorted(known - OPTIONAL[self.kind] - set(names))
        said = []
        if unknown:
            said.append(f"unknown {what}(s) {', '.join(shorten(n, 40) for n in unknown)}")
        if missing:
            said.append(f"missing {', '.join(missing)}")
        if said:
            raise self._fail(f"{where}{'; '.join(said)}. {self.kind.capitalize()} have the "
                             f"columns {', '.join(sorted(known - OPTIONAL[self.kind]))} and "
                             f"optionally {', '.join(sorted(OPTIONAL[self.kind]))}")

    def _open_json(self) -> None:
        with self._text() as handle:
            text = handle.read()
        bad = _undecodable(text)
        if bad:
            line = text.count("\n", 0, _bad_character(text)) + 1
            raise self._fail(f"line {line}: {bad}. Nothing was imported")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            if error.msg == "Extra data" or _first_line_parses(text):
                self.fmt = "jsonl"  # JSON Lines saved as .json
                return
            raise self._fail(f"line {error.lineno}: not valid JSON ({_json_error(error)}); "
                             "a .json file holds one JSON array of objects "
                             "(or one object). Nothing was imported") from None
        self._array = value if isinstance(value, list) else [value]

    # -------------------------------------------------------------- reading
    def _text(self) -> io.TextIOWrapper:
        """The file as text; bytes that do not decode become lone surrogates (one rejected
        line each, see :func:`_undecodable`)."""
        return self.path.open(encoding=self._encoding, errors="surrogateescape", newline="")

    def size_hint(self) -> int:
        """How many records the file holds, without parsing them (for progress bars)."""
        if self.fmt == "parquet":
            return self._parquet.metadata.num_rows
        if self._array is not None:
            return len(self._array)
        lines = 0
        if self._encoding == "utf-16":
            with self._text() as handle:
                lines = sum(1 for _ in handle)
        else:  # count newline bytes a block at a time
            last = b"\n"
            with self.path.open("rb") as handle:
                while block := handle.read(1 << 20):
                    lines += block.count(b"\n")
                    last = block[-1:]
            lines += last != b"\n"  # a last line without a newline
        return max(lines - 1, 0) if self.fmt == "csv" else lines

    def __iter__(self) -> Iterator[dict[str, Any] | Unreadable]:
        self._origins = _Origins()
        self.problems = []
        if self._array is not None:
            yield from self._array
        elif self.fmt == "jsonl":
            yield from self._jsonl()
        elif self.fmt == "csv":
            yield from self._csv()
        else:
            yield from self._parquet_records()

    def _jsonl(self) -> Iterator[dict[str, Any] | Unreadable]:
        index = 0
        with self._text() as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                self._origins.add(index, number)
                index += 1
                bad = _undecodable(line)
                if bad:
                    yield Unreadable(bad)
                    continue
                try:
                    yield json.loads(line.rstrip("\r\n"))
                except ValueError as error:
                    detail = _json_error(error)
                    yield Unreadable(f"not valid JSON ({shorten(detail, 200)}); each line must "
                                     "be one JSON object")

    def _csv(self) -> Iterator[dict[str, Any] | Unreadable]:
        index = 0
        with self._text() as handle:
            reader = csv.reader(handle)
            header = next(reader)
            line = reader.line_num
            while True:
                try:
                    row = next(reader)
                except StopIteration:
                    return
                except csv.Error as error:
                    row = Unreadable(f"not a valid CSV row ({error})")
                start, line = line + 1, reader.line_num
                if row == []:
                    continue
                self._origins.add(index, start)
                index += 1
                yield row if isinstance(row, Unreadable) else _csv_record(header, row)

    def _parquet_records(self) -> Iterator[dict[str, Any] | Unreadable]:
        import pyarrow as pa

        index = row = 0
        for group in range(self._parquet.num_row_groups):
            size = self._parquet.metadata.row_group(group).num_rows
            first = row
            try:
                for batch in self._parquet.iter_batches(batch_size=self.chunk_rows,
                                                        row_groups=[group]):
                    for record in _parquet_rows(batch):
                        self._origins.add(index, row + 1)
                        index += 1
                        row += 1
                        yield record if isinstance(record, Unreadable) else {
                            k: v for k, v in record.items() if not _missing(v)}
            except (pa.ArrowException, OSError, ValueError) as error:
                self.problems.append(
                    f"{self.path} row group {group} (rows {first + 1}-{first + size}): cannot "
                    f"be read ({shorten(str(error), 200)}); its rows from {row + 1} on were "
                    "not imported")
            row = first + size

    # -------------------------------------------------------------- reporting
    def where(self, index: int) -> str:
        """Where the record at ``index`` (0-based, as a rejection counts) came from."""
        if self._array is not None:
            return f"record {index + 1}"
        number = self._origins.number(index)
        return f"row {number}" if self.fmt == "parquet" else f"line {number}"

    def describe(self, rejection: Rejection) -> str:
        """A rejection as ``FILE line N: field: reason (id 'x')``."""
        field = f"{rejection.field}: " if rejection.field else ""
        who = f" (id {rejection.id!r})" if rejection.id else ""
        return f"{self.path} {self.where(rejection.index)}: {field}{rejection.reason}{who}"


def file_records(path: Path, fmt: str, chunk_rows: int = 50_000, *,
                 kind: str | None = None) -> FileRecords:
    """The records of a file, checked on opening (a :class:`~tracker.errors.FileError` when it
    cannot be imported at all) and streamed on iteration.

    - CSV: one record per row; list columns (``items``, ``scores``, ``baseline_items``) hold a
      JSON array (``["a","b"]``) or ids separated by ``|``; ``context`` holds a JSON object;
      an empty cell is a missing field. Ids are read as text.
    - JSON: one array of objects, or one object.
    - JSON Lines: one JSON object per line (a line that is not an object is rejected by
      validation with its line number).
    - Parquet: list columns as Parquet lists, read in row batches.
    """
    return FileRecords(path, fmt, kind=kind, chunk_rows=chunk_rows)


def _json_error(error: ValueError) -> str:
    """What the JSON parser said, with the column (``... at column 40``)."""
    if not isinstance(error, json.JSONDecodeError):
        return str(error)
    return f"{error.msg.removesuffix(' at')} at column {error.colno}"


def _first_line_parses(text: str) -> bool:
    first = text.lstrip().partition("\n")[0]
    try:
        return isinstance(json.loads(first), dict)
    except ValueError:
        return False


def _bad_character(text: str) -> int | None:
    """The position of the first character that stands for a byte that did not decode (read
    with ``surrogateescape``), or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def _undecodable(text: str) -> str | None:
    """Why a line holds bytes that did not decode, or None when it decoded whole."""
    at = _bad_character(text)
    if at is None:
        return None
    code = ord(text[at])
    what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "a lone surrogate"
    column = at - text.rfind("\n", 0, at)
    return f"not UTF-8 text ({what} at column {column}); the file must be {ENCODINGS} throughout"


def _csv_record(header: list[str], row: list[str]) -> dict[str, Any] | Unreadable:
    if len(row) != len(header):
        return Unreadable(f"{len(row)} values for the {len(header)} columns of the header; "
                          "each row has one value per header column (quote values holding "
                          "commas)")
    for cell in row:
        bad = _undecodable(cell)
        if bad:
            return Unreadable(bad)
    return _decode_csv_lists({name: cell for name, cell in zip(header, row, strict=True)
                              if cell != ""})


def _decode_csv_lists(record: dict[str, Any]) -> dict[str, Any]:
    for name in LIST_FIELDS:
        value = record.get(name)
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                with contextlib.suppress(ValueError):  # validation reports it as not a list
                    record[name] = json.loads(text)
            else:
                record[name] = text.split("|") if text else []
    context = record.get("context")
    if isinstance(context, str):
        with contextlib.suppress(ValueError):  # validation reports it as not an object
            record["context"] = json.loads(context)
    return record


def _parquet_rows(batch) -> list[dict[str, Any] | Unreadable]:
    """The rows of a Parquet record batch as dicts; when the batch cannot be converted whole
    (a timestamp outside Python's years 1-9999), row by row, each failing row an
    :class:`Unreadable` that validation rejects on its own."""
    try:
        return batch.to_pylist()
    except (OverflowError, ValueError):
        pass
    rows: list[dict[str, Any] | Unreadable] = []
    for i in range(batch.num_rows):
        try:
            rows.extend(batch.slice(i, 1).to_pylist())
        except (OverflowError, ValueError) as exc:
            rows.append(Unreadable(f"row cannot be read: {shorten(str(exc), 200)}"))
    return rows
