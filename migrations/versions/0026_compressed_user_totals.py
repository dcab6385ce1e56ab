"""The cumulative checkpoint's per-user rows are stored compressed (``user-totals/2``).

A user's rows in ``rollup_user_totals.data`` were plain little-endian records
(``user-totals/1``: cell, impressions, then every layout column's sum and count, 16 bytes a
column): most of them zeros (a user without a hit, without a pre-period), and a row per
slice of a declared dimension multiplies them. Now the same records follow their size
(uint64, little-endian) as an LZ4 frame (pyarrow's ``lz4`` codec), about 5x smaller.

Upgrade: every experiment's ``user-totals/1`` rows are compressed and its checkpoint names
``user-totals/2``; downgrade: back to plain records and ``user-totals/1``, bit for bit (the
rows are the same records either way). Rows go in batches, never a whole table in memory.

Spelled out here, not imported: a migration describes its own revision's formats.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-01
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable

import pyarrow as pa
import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

PLAIN, PACKED = "user-totals/1", "user-totals/2"
SIZE = struct.Struct("<Q")
BATCH = 2000  # users per batch


def _pack(records: bytes) -> bytes:
    return SIZE.pack(len(records)) + pa.compress(records, codec="lz4", asbytes=True)


def _unpack(data: bytes) -> bytes:
    (size,) = SIZE.unpack_from(data)
    return pa.decompress(data[SIZE.size:], decompressed_size=size, codec="lz4", asbytes=True)


def _rewrite(source: str, target: str, convert: Callable[[bytes], bytes]) -> None:
    """Every checkpoint in ``source`` format: its users' rows converted, its format named
    ``target``."""
    conn = op.get_bind()
    for experiment_id, columns in conn.execute(sa.text(
            "SELECT experiment_id, columns FROM rollup_checkpoint "
            "WHERE columns IS NOT NULL")).all():
        described = json.loads(columns)
        if not isinstance(described, dict) or described.get("format") != source:
            continue
        after = ""
        while True:  # by user id, a batch at a time
            rows = conn.execute(sa.text(
                "SELECT user_id, data FROM rollup_user_totals WHERE experiment_id = :e "
                "AND user_id > :a ORDER BY user_id LIMIT :n"),
                {"e": experiment_id, "a": after, "n": BATCH}).all()
            if not rows:
                break
            conn.execute(sa.text(
                "UPDATE rollup_user_totals SET data = :d WHERE experiment_id = :e "
                "AND user_id = :u"),
                [{"d": convert(bytes(data)), "e": experiment_id, "u": user}
                 for user, data in rows])
            after = rows[-1][0]
        conn.execute(sa.text("UPDATE rollup_checkpoint SET columns = :c "
                             "WHERE experiment_id = :e"),
                     {"c": json.dumps({**described, "format": target}), "e": experiment_id})


def upgrade() -> None:
    _rewrite(PLAIN, PACKED, _pack)


def downgrade() -> None:
    _rewrite(PACKED, PLAIN, _unpack)
