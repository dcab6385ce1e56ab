"""Bearer API keys: who may send events (scope ``ingest``) or read experiments (``read``).

The token arrives as ``Authorization: Bearer trk_<key id>_<secret>``. Verification looks the
key id up (cached for ``TRACKER_COLLECTOR_KEY_CACHE_SECONDS``, so a revoked key stops
working within that time; an unknown key id is cached as unknown for as long, so a caller
repeating it does not reach the database on every request) and compares the secret's
SHA-256 with the stored one in constant time. No token, a malformed, unknown, wrong or
revoked one: 401. A valid key of the other scope: 403. A key limited to some experiments
(``tracker keys create --experiment``) reaches only those: the routes refuse the others
(:meth:`Caller.reaches`). Only the public key id is ever logged, never the token.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import sqlalchemy as sa

from tracker.errors import shorten
from tracker.store.db import transaction
from tracker.store.keys import StoredKey, find_key, parse_token


class AuthError(Exception):
    """401 (``status`` 401: who are you?) or 403 (known key, wrong scope)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Caller:
    """A verified key: its public id, scope, and the experiments it is limited to (None:
    every experiment)."""

    key_id: str
    scope: str
    experiments: frozenset[str] | None = None

    def reaches(self, experiment: str) -> bool:
        """Whether this key may write to (ingest) or read (read) ``experiment``."""
        return self.experiments is None or experiment in self.experiments

    def refusal(self, experiment: str) -> str:
        """Why a record or read of ``experiment`` outside the key's experiments is refused."""
        verb = "write to" if self.scope == "ingest" else "read"
        return (f"403: API key {self.key_id} may not {verb} experiment "
                f"{shorten(experiment)!r} (it is limited to "
                f"{', '.join(sorted(map(repr, self.experiments or ())))})")


@dataclass(frozen=True)
class Lookup:
    """What the database said about a key id until ``expires`` (``time.monotonic``):
    its stored key, or None for an id no key has."""

    stored: StoredKey | None
    expires: float


class KeyVerifier:
    """Verifies bearer tokens against the ``api_key`` table, with a short-lived cache.

    Known and unknown key ids are cached apart, each holding at most ``CACHE_SIZE`` entries,
    so a flood of made-up ids can evict only other made-up ids.
    """

    CACHE_SIZE = 10_000

    def __init__(self, engine: sa.Engine, ttl_seconds: float):
        self.engine = engine
        self.ttl = ttl_seconds
        self._known: dict[str, Lookup] = {}
        self._unknown: dict[str, Lookup] = {}
        self._lock = threading.Lock()

    def cached(self, key_id: str) -> Lookup | None:
        """The cached answer for ``key_id``, or None when the database must be asked."""
        with self._lock:
            hit = self._known.get(key_id) or self._unknown.get(key_id)
        if hit is not None and hit.expires > time.monotonic():
            return hit
        return None

    def load(self, key_id: str) -> StoredKey | None:
        """Read the key from the database (may raise StoreUnavailable) and cache the answer,
        an unknown id included."""
        with transaction(self.engine) as conn:
            stored = find_key(conn, key_id)
        if self.ttl > 0:
            cache = self._unknown if stored is None else self._known
            with self._lock:
                if len(cache) >= self.CACHE_SIZE:
                    cache.clear()
                cache[key_id] = Lookup(stored, time.monotonic() + self.ttl)
        return stored


def split_header(authorization: str | None) -> tuple[str, str]:
    """(key id, secret) from an ``Authorization`` header, or AuthError(401)."""
    if not authorization:
        raise AuthError(401, "missing API key: send `Authorization: Bearer <key>` "
                             "(create one with `tracker keys create`)")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError(401, "expected `Authorization: Bearer <key>`")
    parsed = parse_token(token.strip())
    if parsed is None:
        raise AuthError(401, "malformed API key (expected trk_<id>_<secret>)")
    return parsed


def check(stored: StoredKey | None, secret: str, scope: str) -> Caller:
    """The caller a verified key stands for, or AuthError."""
    if stored is None or not stored.matches(secret) or stored.revoked:
        raise AuthError(401, "invalid or revoked API key")
    if stored.scope != scope:
        raise AuthError(403, f"this API key has scope {stored.scope!r}; this endpoint needs "
                             f"{scope!r}")
    return Caller(stored.key_id, stored.scope, stored.experiments)
