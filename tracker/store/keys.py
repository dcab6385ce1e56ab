"""API keys of the HTTP collector: create, list, revoke, verify.

A key is the token ``trk_<key id>_<secret>``: the key id (12 hex characters) is public and
names the key in listings and logs; the secret (256 random bits) is shown once, at creation,
and only its SHA-256 is stored. Verification finds the row by key id and compares digests
with :func:`hmac.compare_digest` (constant time). A plain hash is the right tool here: the
secret is random, not a password, so there is nothing for a slow hash to protect against.

Each key has one scope: ``ingest`` (send events) or ``read`` (read experiments), and reaches
every experiment or only those it was created for (``api_key_experiment``: a key with no row
there reaches every experiment). A revoked key stays listed, with its revocation time, and
never verifies again.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from tracker.errors import NotFound, ValidationError, shorten
from tracker.store.base import KEY_LENGTH, Base, one_of
from tracker.store.models import Experiment
from tracker.store.types import EpochMicros, from_micros

SCOPES = ("ingest", "read")
PREFIX = "trk"
_TOKEN = re.compile(r"^trk_([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})$")


class ApiKey(Base):
    __tablename__ = "api_key"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    key_id: Mapped[str] = mapped_column(sa.String(32), unique=True)
    name: Mapped[str] = mapped_column(sa.String(KEY_LENGTH))
    scope: Mapped[str] = mapped_column(sa.String(16))
    secret_hash: Mapped[str] = mapped_column(sa.String(64))
    created_at: Mapped[datetime] = mapped_column(EpochMicros)
    revoked_at: Mapped[datetime | None] = mapped_column(EpochMicros)

    __table_args__ = (sa.CheckConstraint(one_of("scope", SCOPES), name="scope"),)


class ApiKeyExperiment(Base):
    """An experiment a key is limited to, by the experiment's key (not a foreign key:
    deleting the experiment must not widen the key to every experiment)."""

    __tablename__ = "api_key_experiment"

    api_key_id: Mapped[int] = mapped_column(
        sa.Integer, sa.ForeignKey("api_key.id", ondelete="CASCADE"), primary_key=True)
    experiment: Mapped[str] = mapped_column(sa.String(KEY_LENGTH), primary_key=True)


@dataclass(frozen=True)
class ApiKeyInfo:
    """A key as stored: never its secret. ``experiments``: the experiments it is limited to
    (sorted), None for every experiment."""

    key_id: str
    name: str
    scope: str
    created_at: datetime
    revoked_at: datetime | None
    experiments: tuple[str, ...] | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_dict(self) -> dict:
        return {"key_id": self.key_id, "name": self.name, "scope": self.scope,
                "experiments": None if self.experiments is None else list(self.experiments),
                "created_at": self.created_at.isoformat(),
                "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None}


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_token(token: str) -> tuple[str, str] | None:
    """(key id, secret) of a well-formed token, else None.

    >>> parse_token("trk_0123456789ab_" + "x" * 43)[0]
    '0123456789ab'
    >>> parse_token("Bearer nonsense") is None
    True
    """
    match = _TOKEN.match(token)
    return (match.group(1), match.group(2)) if match else None


def create_key(conn: sa.Connection, name: str, scope: str,
               experiments: Iterable[str] | None = None) -> tuple[ApiKeyInfo, str]:
    """Store a new key; returns it and its token (the only time the token exists).

    ``experiments``: the experiments it may write to (``ingest``) or read (``read``), each an
    existing experiment's key; None (the default) for every experiment. An empty list is
    refused: a key that reaches nothing is a mistake, and "no row" means every experiment.
    """
    if scope not in SCOPES:
        raise ValidationError(f"expected one of {', '.join(SCOPES)}, got {scope!r}", field="scope")
    if not name or len(name) > KEY_LENGTH:
        raise ValidationError(f"a name of 1 to {KEY_LENGTH} characters", field="name")
    chosen = None if experiments is None else tuple(sorted(set(experiments)))
    if chosen is not None:
        if not chosen:
            raise ValidationError("name at least one experiment, or none for every "
                                  "experiment", field="experiment")
        known = set(conn.execute(sa.select(Experiment.key)
                                 .where(Experiment.key.in_(chosen))).scalars())
        unknown = [key for key in chosen if key not in known]
        if unknown:
            raise NotFound(f"no experiment {', '.join(repr(shorten(k)) for k in unknown[:5])}"
                           " (see `tracker experiments list`); no key was created")
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    now = time.time_ns() // 1000
    row_id = conn.execute(sa.insert(ApiKey).values(
        key_id=key_id, name=name, scope=scope, secret_hash=_digest(secret),
        created_at=now).returning(ApiKey.id)).scalar_one()
    if chosen:
        conn.execute(sa.insert(ApiKeyExperiment),
                     [{"api_key_id": row_id, "experiment": key} for key in chosen])
    info = ApiKeyInfo(key_id, name, scope, from_micros(now), None, chosen)
    return info, f"{PREFIX}_{key_id}_{secret}"


def _scopes(conn: sa.Connection, row_ids: list[int]) -> dict[int, tuple[str, ...]]:
    """The experiments of each limited key among ``row_ids`` (a key absent: every one)."""
    if not row_ids:
        return {}
    found: dict[int, list[str]] = {}
    rows = conn.execute(sa.select(ApiKeyExperiment.api_key_id, ApiKeyExperiment.experiment)
                        .where(ApiKeyExperiment.api_key_id.in_(row_ids))
                        .order_by(ApiKeyExperiment.api_key_id, ApiKeyExperiment.experiment))
    for row_id, experiment in rows:
        found.setdefault(row_id, []).append(experiment)
    return {row_id: tuple(keys) for row_id, keys in found.items()}


def _info(row, experiments: tuple[str, ...] | None) -> ApiKeyInfo:
    return ApiKeyInfo(row.key_id, row.name, row.scope, row.created_at, row.revoked_at,
                      experiments)


def list_keys(conn: sa.Connection) -> list[ApiKeyInfo]:
    rows = conn.execute(sa.select(ApiKey.__table__).order_by(ApiKey.id)).all()
    scopes = _scopes(conn, [row.id for row in rows])
    return [_info(row, scopes.get(row.id)) for row in rows]


def revoke_key(conn: sa.Connection, key_id: str) -> ApiKeyInfo:
    """Revoke a key (idempotent: revoking a revoked key keeps its first revocation time)."""
    row = conn.execute(sa.select(ApiKey.__table__).where(ApiKey.key_id == key_id)).first()
    if row is None:
        raise NotFound(f"no API key {key_id!r} (see `tracker keys list`)")
    experiments = _scopes(conn, [row.id]).get(row.id)
    if row.revoked_at is None:
        now = time.time_ns() // 1000
        conn.execute(sa.update(ApiKey).where(ApiKey.key_id == key_id).values(revoked_at=now))
        return ApiKeyInfo(row.key_id, row.name, row.scope, row.created_at, from_micros(now),
                          experiments)
    return _info(row, experiments)


@dataclass(frozen=True)
class StoredKey:
    """What verification needs: the digest, the scope, whether it is revoked, and the
    experiments it is limited to (None: every one)."""

    key_id: str
    scope: str
    secret_hash: str
    revoked: bool
    experiments: frozenset[str] | None = None

    def matches(self, secret: str) -> bool:
        return hmac.compare_digest(self.secret_hash.encode(), _digest(secret).encode())


def find_key(conn: sa.Connection, key_id: str) -> StoredKey | None:
    row = conn.execute(sa.select(ApiKey.id, ApiKey.key_id, ApiKey.scope, ApiKey.secret_hash,
                                 ApiKey.revoked_at).where(ApiKey.key_id == key_id)).first()
    if row is None:
        return None
    experiments = _scopes(conn, [row.id]).get(row.id)
    return StoredKey(row.key_id, row.scope, row.secret_hash, row.revoked_at is not None,
                     None if experiments is None else frozenset(experiments))
