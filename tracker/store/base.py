"""The declarative base every table of the store registers on, and what the tables share.

One :class:`Base` (hence one ``MetaData``) with a naming convention, so every index and
constraint has a stable name that migrations can refer to. The tables live in
:mod:`tracker.store.models` (raw logs and the experiment registry),
:mod:`tracker.store.keys` (API keys) and :mod:`tracker.store.rollup_tables` (what the rollup
writes); each imports this module and nothing imports them back, so there is no import cycle.
:mod:`tracker.store.tables` imports them all: import it (Alembic does) to see every table.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

KEY_LENGTH = 200  # experiment and arm keys
ID_LENGTH = 256  # client ids: impression, event, user, item (config may lower the limit)


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


def one_of(column: str, values: tuple[str, ...]) -> str:
    """The SQL of a CHECK constraint that ``column`` holds one of ``values``.

    >>> one_of("scope", ("ingest", "read"))
    "scope IN ('ingest', 'read')"
    """
    return f"{column} IN ({', '.join(repr(v) for v in values)})"
