"""How PostgreSQL stores the rollup's state values (``data``): no compression attempt where
the values do not compress, lz4 instead of pglz where they do.

PostgreSQL tries to compress every large value with pglz first, at ~10-13 ms of server CPU
per MB written. Measured on the states of 1M impressions a day (PostgreSQL 15):

- ``rollup_provisional`` (a provisional day's encoded impressions and ground truth, 58 MB a
  day): pglz saves under 1% and its attempt made the write 0.74 s against 0.10-0.12 s
  stored as it is. ``STORAGE EXTERNAL`` (out of line, uncompressed), as ``rollup_units``
  has had since 0004 for the same reason.
- ``rollup_pairs`` (21 MB for two days): pglz stored 13.6 MB in 0.58 s, lz4 13.1 MB in
  0.10 s; the other state tables' values (exposure, popularity, first exposures, CUPED's)
  compress too and take lz4 likewise, where the server offers it (PostgreSQL 14 and later,
  built with lz4: ``default_toast_compression`` lists it); elsewhere they stay as they are.

Only values written from now on are stored so; those stored before are read as they are.
Nothing changes on SQLite. The downgrade restores the defaults.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

UNCOMPRESSED = ("rollup_provisional",)
COMPRESSED = ("rollup_pairs", "rollup_popularity", "rollup_exposure", "rollup_first_seen",
              "rollup_user_covariates", "rollup_covariate_sums")


def _methods() -> list[str]:
    """The compression methods the server offers for large values (none: not PostgreSQL
    14 or later)."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return []
    offered = bind.execute(sa.text("SELECT enumvals FROM pg_settings "
                                   "WHERE name = 'default_toast_compression'")).scalar()
    return list(offered or [])


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in UNCOMPRESSED:
        op.execute(sa.text(f"ALTER TABLE {table} ALTER COLUMN data SET STORAGE EXTERNAL"))
    if "lz4" in _methods():
        for table in COMPRESSED:
            op.execute(sa.text(f"ALTER TABLE {table} ALTER COLUMN data SET COMPRESSION lz4"))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in UNCOMPRESSED:
        op.execute(sa.text(f"ALTER TABLE {table} ALTER COLUMN data SET STORAGE EXTENDED"))
    if _methods():
        for table in COMPRESSED:
            op.execute(sa.text(f"ALTER TABLE {table} ALTER COLUMN data "
                               "SET COMPRESSION DEFAULT"))
