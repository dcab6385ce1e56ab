"""The rollup's stored state as self-describing Arrow IPC streams.

Every state the rollup keeps between runs (``rollup_units``, ``rollup_popularity``,
``rollup_exposure``, ...) is one Arrow IPC stream per stored value: named, typed columns
and the format's name and version in the schema metadata (``tracker.format = "units/1"``).
The layout lives in the data, never in code: a reader looks columns up by name, so a
reorder reads the same values, and columns it does not need (a metric dropped since) are
ignored. A column it needs and does not find (a metric or a cutoff added since the state
was written), or another format or version, raises :class:`~tracker.errors.StaleState`,
which tells the user to run ``tracker rollup --full``: stored state is never read by
position, so it is never misread silently.

The formats (columns in the order written; readers do not rely on it):

- ``units/2``: ``user_id`` (string), ``cell`` (int64, :mod:`tracker.rollup.cells`),
  ``impressions`` (int64), then per
  value column ``sum:<name>`` (float64) and, only where some unit's count differs from its
  impressions, ``count:<name>`` (float64; absent: equal to ``impressions``). ``<name>`` is
  ``metric@k``, or the bare metric for one without a cutoff (``sum:ndcg@10``,
  ``sum:r_precision``). (``units/1`` named the cell ``arm_id``: read as this one.)
- ``popularity/3``: ``item_id`` (string), ``users`` (int64); metadata ``tracker.n_users``:
  the experiment's reference period (:mod:`tracker.rollup.popularity`; ``popularity/2``
  counted a window before each day, by the experiment's audience: not read as this one).
- ``exposure/1``: ``item_id`` (string, sorted, unique) and per cutoff ``top@<k>`` (int64:
  lists holding the item in their top k); the catalog row has no ``top@`` column.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from tracker.errors import StaleState

FORMAT = b"tracker.format"
"""The schema metadata key naming a stream's format and version."""

UNITS = "units/2"  # 2: ``cell`` (1: ``arm_id``, the same codes)
POPULARITY = "popularity/3"  # 3: the reference period (2: a window before each day)
EXPOSURE = "exposure/1"

EARLIER = {UNITS: ("units/1", {"arm_id": "cell"})}
"""Earlier versions a reader still reads, by the current format: the earlier one's name and
its columns renamed since (the values are the same)."""

_FULL = "run `tracker rollup --full` to recompute the stored state"


def column_name(metric: str, k: int) -> str:
    """The name of a value column: ``metric@k``, or ``metric`` when it takes no cutoff.

    >>> column_name("ndcg", 10), column_name("r_precision", 0)
    ('ndcg@10', 'r_precision')
    """
    return f"{metric}@{k}" if k else metric


_ZSTD = pa.ipc.IpcWriteOptions(compression="zstd")


def write(table: pa.Table, fmt: str, *, compress: bool = False, **metadata: str) -> memoryview:
    """``table`` as one Arrow IPC stream whose schema metadata names ``fmt`` (and holds
    ``metadata`` as ``tracker.<key>``). A view of Arrow's buffer, which both drivers bind as
    a blob: copying it into ``bytes`` would cost more than writing the stream.

    ``compress``: the buffers zstd-compressed (Arrow IPC's own buffer compression, which
    :func:`read` and any Arrow reader undo), for large states of small integers or mostly
    zeros: they shrink 5-40x, and PostgreSQL then stores them without compressing them
    again itself (its pglz is slow on values of tens of megabytes)."""
    meta = {FORMAT: fmt.encode()}
    meta.update({f"tracker.{key}".encode(): value.encode() for key, value in metadata.items()})
    table = table.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema,
                           options=_ZSTD if compress else None) as writer:
        writer.write_table(table)
    return memoryview(sink.getvalue())


def read(data: bytes | memoryview, fmt: str) -> pa.Table:
    """The table of one stream written by :func:`write` in format ``fmt``; anything else
    (another format or version, bytes that are no Arrow stream, such as a value written
    before the formats were self-describing) raises :class:`StaleState`."""
    try:
        table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    except (pa.ArrowInvalid, OSError) as error:
        raise StaleState(f"stored rollup state is not a {fmt!r} Arrow stream ({error}); "
                         f"{_FULL}") from error
    found = (table.schema.metadata or {}).get(FORMAT, b"").decode(errors="replace")
    earlier, renamed = EARLIER.get(fmt, (None, {}))
    if found == earlier and found is not None:
        return table.rename_columns([renamed.get(n, n) for n in table.column_names]) \
            .replace_schema_metadata(table.schema.metadata)
    if found != fmt:
        raise StaleState(f"stored rollup state has format {found or 'none'!r}, this version "
                         f"of tracker reads {fmt!r}; {_FULL}")
    return table


def format_of(data: bytes | memoryview) -> str | None:
    """The format a stored stream names (its schema only is read), None when it is no
    Arrow stream or names none."""
    try:
        schema = pa.ipc.open_stream(pa.py_buffer(data)).schema
    except (pa.ArrowInvalid, OSError):
        return None
    found = (schema.metadata or {}).get(FORMAT)
    return None if found is None else found.decode(errors="replace")


def metadata(table: pa.Table, key: str) -> str:
    """The value of ``tracker.<key>`` in a table's schema metadata."""
    value = (table.schema.metadata or {}).get(f"tracker.{key}".encode())
    if value is None:
        raise StaleState(f"stored rollup state lacks its {key!r} metadata; {_FULL}")
    return value.decode()


def column(table: pa.Table, name: str, fmt: str) -> pa.ChunkedArray:
    """The column ``name`` of a stored table; a missing one raises :class:`StaleState`
    (the state predates a metric or cutoff that now needs it)."""
    if name not in table.column_names:
        raise StaleState(f"stored rollup state ({fmt}) has no column {name!r}: the metrics or "
                         f"cutoffs changed since it was written; {_FULL}")
    return table[name]


def require(table: pa.Table, names: Sequence[str], fmt: str) -> None:
    """Raise :class:`StaleState` naming every column of ``names`` the table lacks."""
    missing = [n for n in names if n not in table.column_names]
    if missing:
        shown = ", ".join(repr(n) for n in missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise StaleState(f"stored rollup state ({fmt}) has no column {shown}: the metrics or "
                         f"cutoffs changed since it was written; {_FULL}")
