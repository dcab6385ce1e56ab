"""The project's own exceptions: every public failure is one of these.

Callers catch :class:`TrackerError` for "anything tracker refused or could not do";
the subclasses say which kind, and the message says what was wrong and how to fix it.
"""

from __future__ import annotations

import re

_URL_PASSWORD = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/?#@'\"]*:)[^\s/?#'\"]*@")
_PASSWORD_PARAMETER = re.compile(r"(?i)((?:\b|[?&])(?:ssl)?password=)[^&\s'\"]*")
_KEY_SECRET = re.compile(r"\b(trk_[0-9a-f]{12}_)[A-Za-z0-9_-]{20,100}")


def redact(text: str) -> str:
    """``text`` with every secret tracker knows the shape of shown as ``***``: the password
    of a URL (``scheme://user:PASSWORD@host``), a ``password=`` (or ``sslpassword=``)
    parameter, and the secret of an API key token (``trk_<key id>_SECRET``: the public key id
    stays). The one masking rule of the project: every :class:`TrackerError`'s message,
    ``tracker config`` and every logged or printed database URL go through it.

    >>> redact("cannot reach postgresql+psycopg://u:pw@db:5432/x?password=pw&sslmode=require")
    'cannot reach postgresql+psycopg://u:***@db:5432/x?password=***&sslmode=require'
    >>> redact("token trk_0123456789ab_" + "s" * 43)
    'token trk_0123456789ab_***'
    """
    text = _URL_PASSWORD.sub(r"\1***@", text)
    text = _PASSWORD_PARAMETER.sub(r"\1***", text)
    return _KEY_SECRET.sub(r"\1***", text)


def mask_webhook(url: str) -> str:
    """A webhook URL as it may be printed or logged: its scheme and host, the rest ``***``
    (a Slack incoming webhook's path *is* its secret; the password rule of :func:`redact`
    applies to the host part as well).

    >>> mask_webhook("https://hooks.slack.com/services/T0/B0/abc")
    'https://hooks.slack.com/***'
    >>> mask_webhook("http://u:pw@alerts.local:8080")
    'http://u:***@alerts.local:8080'
    >>> mask_webhook("hooks.slack.com/services/T0/B0/abc")  # no scheme: a bad setting
    'hooks.slack.com/***'
    """
    scheme, sep, rest = url.partition("://")
    if not sep:  # not a URL (a bad setting): past its first part, everything may be secret
        scheme, rest = "", url
    host = re.split(r"[/?#]", rest, maxsplit=1)[0]
    masked = redact(f"{scheme}{sep}{host}")
    return masked if host == rest else masked + "/***"


class TrackerError(Exception):
    """Base class of every error tracker raises on purpose. Its message never holds a secret:
    text arguments are :func:`redact`-ed (a database password, an API key's secret), whoever
    builds the error and from whatever they quote."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class ConfigError(TrackerError, ValueError):
    """A ``TRACKER_*`` setting (or an argument standing in for one) has a bad value."""


class MissingExtra(TrackerError, ImportError):
    """A command needs an optional part of tracker that is not installed; the message names
    the extra and the ``pip install`` line that adds it (:func:`tracker.install.require`)."""


class ValidationError(TrackerError, ValueError):
    """Input was rejected; nothing of it was stored.

    ``field`` names the offending field when there is one, ``reason`` is the bare reason.
    """

    def __init__(self, reason: str, *, field: str | None = None, record_id: str | None = None):
        self.reason = reason
        self.field = field
        self.record_id = record_id
        where = f"{field}: " if field else ""
        who = f" (id {record_id!r})" if record_id else ""
        super().__init__(f"{where}{reason}{who}")


class FileError(ValidationError):
    """A file cannot be imported at all (empty, not UTF-8, not the format it claims, a bad
    header, a corrupt Parquet footer); the message names the file, where, what is wrong and
    what is accepted. Nothing of it was stored."""


class NotFound(TrackerError, LookupError):
    """A named experiment, arm or object does not exist."""


class AlreadyExists(TrackerError):
    """Creating something whose key is already taken."""


class ConflictError(TrackerError):
    """The same client id was sent again with a different payload; the stored one is kept."""

    def __init__(self, kind: str, ids: list[str]):
        self.kind = kind
        self.ids = list(ids)
        shown = ", ".join(repr(i) for i in self.ids[:5]) + (" ..." if len(self.ids) > 5 else "")
        super().__init__(
            f"{len(self.ids)} {kind} id(s) already stored with a different payload: {shown}; "
            "the stored version was kept (send a new id for a different event)"
        )


class StoreError(TrackerError):
    """The database refused an operation (constraint, SQL error, ...)."""


class StoreUnavailable(StoreError):
    """The database cannot be reached (down, wrong address, locked for too long)."""


class TransientStoreError(StoreUnavailable):
    """A failure that a new attempt of the same unit of work may not meet: a deadlock, a
    serialization failure, a lost connection, a busy SQLite database. The store retries it
    (:func:`tracker.store.db.retried`) and raises plain :class:`StoreUnavailable` once the
    retries are spent."""


class SchemaOutdated(StoreError):
    """The database schema is missing or behind this version of tracker."""


class StaleState(StoreError):
    """Stored rollup state cannot be read by this version or these settings (another format,
    or metrics and cutoffs that changed since it was written); ``tracker rollup --full``
    recomputes it."""


class Busy(TrackerError):
    """Another process holds the lock this operation needs (e.g. a rollup already running)."""


class RollupIncomplete(TrackerError):
    """A rollup of every experiment that could not roll up some of them: the others were
    rolled up all the same. ``summaries`` are the finished experiments' summaries,
    ``failures`` the others' ``(experiment key, error)``; a failed experiment's results and
    watermarks are where its previous run left them, so its next run retries it.
    ``only_busy``: every failure is a :class:`Busy` (another rollup of that experiment was
    running: nothing is wrong)."""

    def __init__(self, summaries: list, failures: list[tuple[str, Exception]]):
        self.summaries = list(summaries)
        self.failures = list(failures)
        self.only_busy = all(isinstance(error, Busy) for _, error in self.failures)
        said = "; ".join(f"{key}: {describe(error)}" for key, error in self.failures)
        done = len(self.summaries)
        rest = f"; the other {done} were rolled up" if done else ""
        super().__init__(f"{len(self.failures)} of {done + len(self.failures)} experiment(s) "
                         f"not rolled up ({said}){rest}; `tracker rollup EXPERIMENT` (with "
                         "--full if so told) retries one alone")


def describe(error: BaseException) -> str:
    """An error as one line: tracker's own by their message (they say what was wrong),
    anything else with its type too."""
    return str(error) if isinstance(error, TrackerError) else f"{type(error).__name__}: {error}"


class InvalidTransition(TrackerError):
    """An experiment cannot go from its status to the one asked (archive a running one,
    restart an archived one)."""


class ExpiredLogs(TrackerError):
    """The raw logs an operation needs were expired (``tracker logs expire``)."""


class EngineConflict(TrackerError):
    """An experiment's results came from the other engine's logs, and this engine cannot
    take it over without losing them (:mod:`tracker.rollup.sources`)."""


def shorten(value: object, limit: int = 64, *, say_length: bool = True) -> str:
    """``value`` as text (a string as is, anything else by ``repr``) cut to its first ``limit``
    characters, so that no message or response echoes a rejected value whole (a 300 MB id is
    shown as its prefix). A cut text ends with its full length said, or with "…" alone when
    ``say_length`` is false (where the text is itself a value, such as a rejected record's id).
    The one shortening rule of the project: :func:`tracker.ingest.validate.shown` and
    ``shown_id`` call it.

    >>> shorten("abc")
    'abc'
    >>> shorten("x" * 100, limit=8)
    'xxxxxxxx... (100 characters)'
    >>> shorten("x" * 100, limit=8, say_length=False)
    'xxxxxxxx…'
    """
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return text
    return text[:limit] + (f"... ({len(text)} characters)" if say_length else "…")
