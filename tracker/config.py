"""Typed configuration: every ``TRACKER_*`` environment variable is declared here, once.

Each setting has a type, a default and a line of documentation; ``tracker config`` prints
them. A bad value raises :class:`~tracker.errors.ConfigError` naming the variable and the
expected form.

>>> s = Settings.from_env({"TRACKER_MAX_ITEMS": "50"})
>>> s.max_items
50
>>> Settings.from_env({"TRACKER_MAX_ITEMS": "many"})
Traceback (most recent call last):
...
tracker.errors.ConfigError: TRACKER_MAX_ITEMS='many': expected a whole number >= 1
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracker.errors import ConfigError, mask_webhook, redact

DEFAULT_SQLITE_FILE = "tracker.db"


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError("a whole number >= 1")
    return value


def _non_negative_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError("a whole number >= 0")
    return value


def _non_negative_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ValueError("a finite number >= 0")
    return value


def _instant(raw: str) -> datetime:
    """An ISO 8601 date-time (naive = UTC), kept with its offset."""
    try:
        value = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise ValueError("an ISO 8601 date-time, e.g. 2000-01-01T00:00:00Z") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _positive_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ValueError("a finite number > 0")
    return value


def _port(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= 65535:
        raise ValueError("a port number from 1 to 65535")
    return value


def _host(raw: str) -> str:
    value = raw.strip()
    if not value or any(c.isspace() for c in value):
        raise ValueError("a host name or IP address, e.g. 0.0.0.0")
    return value


def _http_url(raw: str) -> str:
    value = raw.strip()
    if not re.match(r"^https?://[^\s/]+", value) or any(c.isspace() for c in value):
        raise ValueError("an http:// or https:// URL, e.g. https://hooks.slack.com/services/...")
    return value


def _database_url(raw: str) -> str:
    return normalize_database_url(raw)


def normalize_database_url(raw: str) -> str:
    """Check a database URL and give it the driver tracker uses.

    ``postgresql://`` and ``postgres://`` get the psycopg 3 driver; a relative SQLite path
    stays relative to the working directory.

    >>> normalize_database_url("postgres://u@h:5432/db")
    'postgresql+psycopg://u@h:5432/db'
    >>> normalize_database_url("mysql://x")
    Traceback (most recent call last):
    ...
    ValueError: sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB, not driver 'mysql'
    """
    expected = "sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB"
    raw = raw.strip()
    scheme, sep, rest = raw.partition("://")
    if not sep or not rest:
        raise ValueError(expected)
    if scheme in ("postgres", "postgresql", "postgresql+psycopg"):
        _check_server(rest, expected)
        return "postgresql+psycopg://" + rest
    if scheme in ("sqlite", "sqlite+pysqlite"):
        if not rest.startswith("/"):
            raise ValueError(f"{expected} (a SQLite path after three slashes)")
        return "sqlite://" + rest
    driver = f"driver {scheme!r}" if re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme) \
        else "a URL scheme"
    raise ValueError(f"{expected}, not {driver}")


def _check_server(rest: str, expected: str) -> None:
    """Refuse a server URL whose host or port SQLAlchemy would fail on later with a bare
    ``ValueError`` (a port that is no number, an unclosed IPv6 bracket).

    >>> _check_server("u:pw@db:five/x", "FORM")
    Traceback (most recent call last):
    ...
    ValueError: a port number from 1 to 65535 after the host, got 'five' (FORM)
    """
    authority = rest.partition("/")[0].partition("?")[0]
    host = authority.rpartition("@")[2]
    if host.startswith("["):
        address, bracket, after = host[1:].partition("]")
        if not bracket or not address:
            raise ValueError(f"an IPv6 host in brackets, e.g. [::1]:5432 ({expected})")
        port = after[1:] if after.startswith(":") else None
        if after and port is None:
            raise ValueError(f"a port after ':' following the host ({expected})")
    else:
        port = host.partition(":")[2] if ":" in host else None
    if port and not (port.isdigit() and port.isascii() and 1 <= int(port) <= 65535):
        raise ValueError(f"a port number from 1 to 65535 after the host, got "
                         f"{port[:20]!r} ({expected})")


def mask_password(url: str) -> str:
    """``url`` with its password (in the user part or a ``password=`` query parameter) shown
    as ``***``, for printing and logging (:func:`tracker.errors.redact`).

    >>> mask_password("postgresql+psycopg://tracker:s3cret@db:5432/tracker")
    'postgresql+psycopg://tracker:***@db:5432/tracker'
    >>> mask_password("postgresql+psycopg://tracker@db/tracker?sslmode=require&password=s3cret")
    'postgresql+psycopg://tracker@db/tracker?sslmode=require&password=***'
    >>> mask_password("sqlite:///tracker.db")
    'sqlite:///tracker.db'
    """
    return redact(url)


@dataclass(frozen=True)
class _Var:
    env: str
    parse: Callable[[str], Any]
    doc: str
    holds_password: bool = False  # a URL that may carry a password: shown masked
    webhook: bool = False  # a URL whose path is a secret: shown as its scheme and host

    def shown(self, value: Any) -> str:
        """The value as ``tracker config`` and error messages print it (passwords and a
        webhook's path masked)."""
        if self.webhook and value is not None:
            return mask_webhook(str(value))
        return mask_password(str(value)) if self.holds_password else str(value)


@dataclass(frozen=True)
class Settings:
    """All settings, with their defaults. Build from the environment with :meth:`from_env`."""

    database_url: str = field(
        default=f"sqlite:///{DEFAULT_SQLITE_FILE}",
        metadata={"var": _Var("TRACKER_DATABASE_URL", _database_url,
                              "database to use; default: the SQLite file ./tracker.db",
                              holds_password=True)},
    )
    max_items: int = field(
        default=1000,
        metadata={"var": _Var("TRACKER_MAX_ITEMS", _positive_int,
                              "most items one served list may hold")},
    )
    max_id_length: int = field(
        default=256,
        metadata={"var": _Var("TRACKER_MAX_ID_LENGTH", _positive_int,
                              "longest id (impression, event, user, item), at most 256")},
    )
    max_future_seconds: float = field(
        default=300.0,
        metadata={"var": _Var("TRACKER_MAX_FUTURE_SECONDS", _non_negative_float,
                              "how far past the server clock an event time may lie")},
    )
    min_event_time: datetime = field(
        default=datetime(2000, 1, 1, tzinfo=UTC),
        metadata={"var": _Var("TRACKER_MIN_EVENT_TIME", _instant,
                              "earliest event time accepted (ISO 8601; lower it for "
                              "backfills of older logs)")},
    )
    sqlite_busy_timeout_ms: int = field(
        default=30_000,
        metadata={"var": _Var("TRACKER_SQLITE_BUSY_TIMEOUT_MS", _positive_int,
                              "how long a SQLite writer waits for another one before failing")},
    )
    store_retries: int = field(
        default=4,
        metadata={"var": _Var("TRACKER_STORE_RETRIES", _non_negative_int,
                              "new attempts of a unit of work that met a deadlock, a "
                              "serialization failure, a lost connection or a busy database")},
    )
    batch_size: int = field(
        default=10_000,
        metadata={"var": _Var("TRACKER_BATCH_SIZE", _positive_int,
                              "records written per transaction by the bulk paths")},
    )
    rollup_grace_seconds: float = field(
        default=3600.0,
        metadata={"var": _Var("TRACKER_ROLLUP_GRACE_SECONDS", _non_negative_float,
                              "how long after a day's last attribution window closes its "
                              "results stay provisional (late events)")},
    )
    rollup_popularity_days: int = field(
        default=28,
        metadata={"var": _Var("TRACKER_ROLLUP_POPULARITY_DAYS", _positive_int,
                              "days of interactions before an experiment's first day that "
                              "define its item popularity (surprisal)")},
    )
    rollup_chunk_cells: int = field(
        default=5_000_000,
        metadata={"var": _Var("TRACKER_ROLLUP_CHUNK_CELLS", _positive_int,
                              "impressions x list length the rollup holds in memory at once")},
    )
    retention_days: int | None = field(
        default=None,
        metadata={"var": _Var("TRACKER_RETENTION_DAYS", _positive_int,
                              "expire raw impressions and interactions older than this many "
                              "days after each successful `tracker rollup` of every "
                              "experiment (stored results stay); unset: keep them forever")},
    )
    alert_url: str | None = field(
        default=None,
        metadata={"var": _Var("TRACKER_ALERT_URL", _http_url,
                              "webhook the rollup POSTs JSON alerts to ({\"text\": ...}, "
                              "Slack-compatible) when an experiment's health turns failing, a "
                              "guardrail fails or a decision changes; unset: no alerts",
                              webhook=True)},
    )
    collector_host: str = field(
        default="127.0.0.1",
        metadata={"var": _Var("TRACKER_COLLECTOR_HOST", _host,
                              "address `tracker serve` listens on (0.0.0.0: every interface)")},
    )
    collector_port: int = field(
        default=8000,
        metadata={"var": _Var("TRACKER_COLLECTOR_PORT", _port,
                              "port `tracker serve` listens on")},
    )
    collector_workers: int = field(
        default=1,
        metadata={"var": _Var("TRACKER_COLLECTOR_WORKERS", _positive_int,
                              "collector worker processes (/metrics adds them up)")},
    )
    collector_max_batch: int = field(
        default=5000,
        metadata={"var": _Var("TRACKER_COLLECTOR_MAX_BATCH", _positive_int,
                              "most events one collector request may carry (more: HTTP 413)")},
    )
    collector_max_body_bytes: int = field(
        default=16 * 1024 * 1024,
        metadata={"var": _Var("TRACKER_COLLECTOR_MAX_BODY_BYTES", _positive_int,
                              "largest collector request body in bytes (more: HTTP 413)")},
    )
    collector_max_elements: int = field(
        default=500_000,
        metadata={"var": _Var("TRACKER_COLLECTOR_MAX_ELEMENTS", _positive_int,
                              "most JSON values (array items and object members) one collector "
                              "request may hold, counted before it is parsed (more: HTTP 413)")},
    )
    collector_retry_after_seconds: int = field(
        default=2,
        metadata={"var": _Var("TRACKER_COLLECTOR_RETRY_AFTER_SECONDS", _positive_int,
                              "Retry-After the collector sends with 503 (database unavailable)")},
    )
    collector_key_cache_seconds: float = field(
        default=10.0,
        metadata={"var": _Var("TRACKER_COLLECTOR_KEY_CACHE_SECONDS", _non_negative_float,
                              "how long the collector trusts a looked-up API key (a revoked "
                              "key stops working within this time)")},
    )
    collector_read_timeout: float = field(
        default=30.0,
        metadata={"var": _Var("TRACKER_COLLECTOR_READ_TIMEOUT", _positive_float,
                              "seconds a collector client has to send a request's headers "
                              "(from connecting or from the previous response) and, then, "
                              "its whole body; a slower connection is closed (body: HTTP 408)")},
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read every declared variable from ``environ`` (default ``os.environ``)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            var: _Var = f.metadata["var"]
            raw = environ.get(var.env)
            if raw is None or raw == "":
                continue
            try:
                values[f.name] = var.parse(raw)
            except ValueError as exc:
                raise ConfigError(f"{var.env}={var.shown(raw)!r}: expected {exc}") from None
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with some settings changed (values are checked like the environment's)."""
        checked = {}
        for name, value in changes.items():
            f = next((f for f in dataclasses.fields(self) if f.name == name), None)
            if f is None:
                raise ConfigError(f"unknown setting {name!r}")
            var: _Var = f.metadata["var"]
            try:
                checked[name] = var.parse(str(value))
            except ValueError as exc:
                raise ConfigError(f"{name}={var.shown(value)!r}: expected {exc}") from None
        return dataclasses.replace(self, **checked)

    def shown(self, env: str) -> str:
        """The current value of the variable ``env`` as printed (passwords masked)."""
        f = next(f for f in dataclasses.fields(self) if f.metadata["var"].env == env)
        return f.metadata["var"].shown(getattr(self, f.name))

    @classmethod
    def describe(cls) -> list[tuple[str, str, str]]:
        """(variable, default, doc) for every setting, for ``tracker config``."""
        return [
            (f.metadata["var"].env, str(f.default), f.metadata["var"].doc)
            for f in dataclasses.fields(cls)
        ]


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL, or None for another database or an in-memory one."""
    if not url.startswith("sqlite://"):
        return None
    path = url[len("sqlite:///"):]
    if path in ("", ":memory:"):
        return None
    return Path(path)
