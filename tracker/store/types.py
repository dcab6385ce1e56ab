"""Column types that read the same on SQLite and PostgreSQL.

- :class:`EpochMicros`: an instant, stored as whole microseconds since 1970-01-01 UTC in a
  BIGINT. Python sees timezone-aware UTC datetimes; SQL sees integers, so window arithmetic
  (``served_at + window``) and day boundaries (computed in Python for the reporting time zone,
  daylight-saving changes included) compare the same way on every engine, and indexes on event
  time stay plain integer indexes.
- ``ITEM_LIST`` / ``SCORE_LIST``: a served list in one row. PostgreSQL stores ``text[]`` /
  ``float8[]`` (3× smaller than a row per item and about twice as fast to COPY, see
  ``../shared/PERFORMANCE-NOTES.md``) and explodes it with ``unnest(...) WITH ORDINALITY``;
  SQLite stores a JSON array and explodes it with ``json_each``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_NAIVE = datetime(1970, 1, 1)


def to_micros(value: datetime) -> int:
    """Microseconds since the epoch; a naive datetime is taken to be UTC.

    >>> to_micros(datetime(1970, 1, 1, 0, 0, 1, 5))
    1000005
    >>> from datetime import timezone
    >>> to_micros(datetime(1970, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))))
    0
    """
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    delta = value - _EPOCH_NAIVE
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    """The aware UTC datetime of a microsecond count.

    >>> from_micros(1000005)
    datetime.datetime(1970, 1, 1, 0, 0, 1, 5, tzinfo=datetime.timezone.utc)
    """
    return EPOCH + timedelta(microseconds=int(value))


def stored_micros(column) -> sa.ColumnElement:
    """An :class:`EpochMicros` column as the integer it stores (microseconds since the epoch),
    for SQL that compares or returns it without a datetime round trip."""
    return sa.type_coerce(column, sa.BigInteger)


class EpochMicros(sa.types.TypeDecorator):
    """An aware datetime in Python, microseconds since the epoch (BIGINT) in the database."""

    impl = sa.BigInteger
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None or isinstance(value, int):
            return value
        return to_micros(value)

    def process_result_value(self, value, dialect):
        return None if value is None else from_micros(value)


ITEM_LIST = sa.JSON().with_variant(postgresql.ARRAY(sa.Text()), "postgresql")
SCORE_LIST = sa.JSON().with_variant(postgresql.ARRAY(sa.Double()), "postgresql")
JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
# BIGINT ids on PostgreSQL; on SQLite only INTEGER PRIMARY KEY aliases the rowid.
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
