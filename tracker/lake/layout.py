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
as ``served_at`` / ``occurred_at``. Only CUPED's covariates read it (the history as known at
a user's first exposure: :mod:`tracker.spark.covariates`).
"""

from __future__ import annotations

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
