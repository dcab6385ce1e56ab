"""The lake layout: impressions and interactions as Parquet, the fields of the logging API.

Any Parquet files under a directory, partition folders allowed (``tracker export`` writes
``day=YYYY-MM-DD/part-N.parquet``, the UTC day of ``served_at`` / ``occurred_at``). A reader
ignores extra columns; a nullable column may be absent (read as all null); a required column
must be there with its type.

Impressions (one served list):

=================  =====================  ========
column             type                   nullable
=================  =====================  ========
impression_id      string                 no
experiment         string (its key)       no
arm                string (its key)       no
user_id            string                 no
served_at          timestamp[us, UTC]     no
items              list<string>           no
scores             list<double>           yes
baseline_items     list<string>           yes
context            string (a JSON object) yes
received_at        timestamp[us, UTC]     yes
=================  =====================  ========

Interactions (one user event on an item):

=================  =====================  ========
event_id           string                 no
user_id            string                 no
item_id            string                 no
event              string                 no
value              double                 yes
occurred_at        timestamp[us, UTC]     no
impression_id      string                 yes
received_at        timestamp[us, UTC]     yes
=================  =====================  ========

``received_at`` (both logs) is when the row reached the log (the database's receipt time;
``tracker export`` writes it). It is not part of a row's payload: the same id with another
receipt time is a duplicate, and the earliest receipt counts. Absent or null, it is taken
as ``served_at`` / ``occurred_at``. It only orders duplicates: no metric reads it (CUPED's
covariates follow event time: :mod:`tracker.spark.covariates`).

**Bucketed by user** (optional; ``tracker export --buckets N``): every file holds the rows of
one user bucket, :func:`user_bucket` of its ``user_id`` (64-bit FNV-1a of the id's UTF-8
bytes, modulo N), and says so in its footer's key-value metadata (:data:`BUCKET`,
:data:`BUCKETS`: its bucket and N); the export puts it under ``day=YYYY-MM-DD/bucket=B/``.
When every file of both logs is bucketed alike, the Spark rollup scores each bucket's day
from its own files, without shuffling the logs (:mod:`tracker.spark.buckets`); a row in the
wrong bucket fails that run, naming the file. Any other lake reads as before.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

TIMESTAMP = pa.timestamp("us", tz="UTC")
"""Every instant of the lake: microseconds, UTC (the database's precision)."""

IMPRESSIONS = pa.schema([
    pa.field("impression_id", pa.string(), nullable=False),
    pa.field("experiment", pa.string(), nullable=False),
    pa.field("arm", pa.string(), nullable=False),
    pa.field("user_id", pa.string(), nullable=False),
    pa.field("served_at", TIMESTAMP, nullable=False),
    pa.field("items", pa.list_(pa.string()), nullable=False),
    pa.field("scores", pa.list_(pa.float64()), nullable=True),
    pa.field("baseline_items", pa.list_(pa.string()), nullable=True),
    pa.field("context", pa.string(), nullable=True),
    pa.field("received_at", TIMESTAMP, nullable=True),
])
"""The impressions' columns, in this order."""

INTERACTIONS = pa.schema([
    pa.field("event_id", pa.string(), nullable=False),
    pa.field("user_id", pa.string(), nullable=False),
    pa.field("item_id", pa.string(), nullable=False),
    pa.field("event", pa.string(), nullable=False),
    pa.field("value", pa.float64(), nullable=True),
    pa.field("occurred_at", TIMESTAMP, nullable=False),
    pa.field("impression_id", pa.string(), nullable=True),
    pa.field("received_at", TIMESTAMP, nullable=True),
])
"""The interactions' columns, in this order."""

IDS = {"impressions": "impression_id", "interactions": "event_id"}
"""The client id of each log: a row seen twice under one id counts once."""

TIMES = {"impressions": "served_at", "interactions": "occurred_at"}
"""The instant each log is partitioned by (its UTC day)."""

RECEIVED = "received_at"
"""The optional receipt time of both logs: no part of a row's payload (module docstring)."""

SCHEMAS = {"impressions": IMPRESSIONS, "interactions": INTERACTIONS}

BUCKET = b"tracker.bucket"
"""Footer metadata key of a bucketed file: its bucket (decimal text)."""
BUCKETS = b"tracker.buckets"
"""Footer metadata key of a bucketed file: the lake's number of buckets (decimal text)."""

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def user_bucket(users: pa.Array | pa.ChunkedArray, buckets: int) -> np.ndarray:
    """The bucket (0 .. ``buckets`` - 1) of each user id: :func:`user_hash` modulo
    ``buckets``.

    >>> user_bucket(pa.array(["", "a", "u1"]), 1 << 62).tolist()
    [860922984064492325, 3414815163700866188, 631765120777144307]
    """
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    return (user_hash(users) % np.uint64(buckets)).astype(np.int64)


def user_hash(users: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The 64-bit FNV-1a hash of each user id's UTF-8 bytes (``uint64``), vectorised: one
    pass per byte position over the ids that long."""
    users = users.combine_chunks() if isinstance(users, pa.ChunkedArray) else users
    users = users.cast(pa.large_binary())
    n = len(users)
    if n == 0:
        return np.empty(0, np.uint64)
    offsets = np.frombuffer(users.buffers()[1], np.int64, n + 1, users.offset * 8)
    data = users.buffers()[2]
    data = np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8)
    hashes = np.full(n, _FNV_OFFSET)
    active = np.flatnonzero(offsets[1:] > offsets[:-1])
    position = offsets[active]
    with np.errstate(over="ignore"):
        while active.size:
            hashes[active] = (hashes[active] ^ data[position]) * _FNV_PRIME
            position = position + 1
            keep = position < offsets[active + 1]
            active, position = active[keep], position[keep]
    return hashes


def bucket_metadata(bucket: int, buckets: int) -> dict[bytes, bytes]:
    """The footer metadata of a file holding ``bucket`` of ``buckets``."""
    return {BUCKET: str(bucket).encode(), BUCKETS: str(buckets).encode()}

