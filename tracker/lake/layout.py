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
=================  =====================  ========
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
])
"""The interactions' columns, in this order."""

IDS = {"impressions": "impression_id", "interactions": "event_id"}
"""The client id of each log: a row seen twice under one id counts once."""

TIMES = {"impressions": "served_at", "interactions": "occurred_at"}
"""The instant each log is partitioned by (its UTC day)."""

SCHEMAS = {"impressions": IMPRESSIONS, "interactions": INTERACTIONS}
