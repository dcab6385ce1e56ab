"""``rollup_provisional`` goes: a provisional day keeps no encoded state.

Until this release a day computed while its attribution windows were open kept its encoded
impressions and ground truth, so that later interactions answering it were scored from that
state rather than by reading the users they changed from the logs. Measured on the nightly
benchmark, the state cost more to write every night than it saved; the rollup now reads the
changed users' lists again (:mod:`tracker.rollup.partial`), the one way it recomputes a day
for some of its users. Nothing to convert: the table held derived data only, and a day
without a row was always recomputed from the logs. The downgrade creates the table again,
empty (the release before then reads such days from the logs as it did for any day without
a row), with the storage migration 0015 gave it on PostgreSQL.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("rollup_provisional")


def downgrade() -> None:
    op.create_table(
        "rollup_provisional",
        sa.Column("experiment_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "day", "part",
                                name=op.f("pk_rollup_provisional")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.text("ALTER TABLE rollup_provisional ALTER COLUMN data "
                           "SET STORAGE EXTERNAL"))
