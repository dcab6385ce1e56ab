"""The rollup's stored state becomes self-describing: each value of ``rollup_units``,
``rollup_pairs``, ``rollup_popularity`` and ``rollup_exposure`` is one Arrow IPC stream
(column ``data``) with named columns and its format and version in the schema metadata,
replacing JSON arrays beside raw little-endian matrices whose layout lived in code.

Existing state is **invalidated**, not converted: both directions empty the four tables and
set every experiment's watermarks to NULL (the rule of 0006: the next ``tracker rollup``
recomputes every day from the logs). Why not convert: the old bytes can only be read with
the column layout of the code that wrote them (``Layout.for_cutoffs`` and the metric
catalogue of that version), which a migration must not import, and a wrong guess would be
read silently; the state is derived from the raw logs, which stay, and so do the results the
report reads (``rollup_metric``, ``rollup_health``, ``rollup_day``) until the rebuild
replaces them. The cost is one full recompute per experiment at the next run.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

STATE = ("rollup_units", "rollup_pairs", "rollup_popularity", "rollup_exposure")

OLD_COLUMNS = {
    "rollup_units": (("users", sa.Text()), ("arms", sa.LargeBinary()),
                     ("impressions", sa.LargeBinary()), ("sums", sa.LargeBinary()),
                     ("counts", sa.LargeBinary())),
    "rollup_pairs": (("items", sa.Text()), ("users", sa.Text()), ("pairs", sa.LargeBinary())),
    "rollup_popularity": (("items", sa.Text()), ("users", sa.LargeBinary()),
                          ("n_users", sa.BigInteger())),
    "rollup_exposure": (("items", sa.Text()), ("counts", sa.LargeBinary())),
}
"""The columns each table held before this revision (what ``data`` replaces)."""


def _invalidate() -> None:
    """Forget the stored state and the watermarks: the next run recomputes every day."""
    for table in STATE:
        op.execute(sa.text(f"DELETE FROM {table}"))
    op.execute(sa.text("UPDATE rollup_state SET impressions_seen = NULL, "
                       "interactions_seen = NULL"))


def _external(table: str, columns: tuple[str, ...]) -> None:
    if op.get_bind().dialect.name == "postgresql":
        # float columns barely compress: skip TOAST's compression attempt (2-4x slower
        # writes), store them out of line as they are
        for column in columns:
            op.execute(sa.text(f"ALTER TABLE {table} ALTER COLUMN {column} SET STORAGE EXTERNAL"))


def upgrade() -> None:
    _invalidate()
    for table, columns in OLD_COLUMNS.items():
        with op.batch_alter_table(table) as batch:
            for name, _ in columns:
                batch.drop_column(name)
            batch.add_column(sa.Column("data", sa.LargeBinary(), nullable=False))
    _external("rollup_units", ("data",))


def downgrade() -> None:
    _invalidate()
    for table, columns in OLD_COLUMNS.items():
        with op.batch_alter_table(table) as batch:
            batch.drop_column("data")
            for name, kind in columns:
                batch.add_column(sa.Column(name, kind, nullable=False))
    _external("rollup_units", ("users", "arms", "impressions", "sums", "counts"))
