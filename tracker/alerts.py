"""Alerts: after each rollup, what changed for the worse or for the decision, POSTed as JSON
to ``TRACKER_ALERT_URL`` (``{"text": ...}``, which Slack's incoming webhooks and most chat
tools accept).

:func:`alert_texts` compares an experiment's stored summary before and after a run (pure);
:func:`post` sends one message with retries and exponential backoff; :func:`send_later` sends
a run's messages from a background thread, so a slow or dead webhook never blocks or fails
the rollup (a message that cannot be delivered is logged and dropped).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable

from tracker.errors import mask_webhook
from tracker.report.render import OUTCOME_LABELS
from tracker.report.summary import ExperimentSummary

log = logging.getLogger(__name__)

RETRIES = 3
"""New attempts after a failed POST (4 in all)."""
BACKOFF_SECONDS = 0.5
"""Wait before the first retry; it doubles after each (0.5, 1, 2 s)."""
TIMEOUT_SECONDS = 5.0
"""Longest wait for one attempt's connection and answer."""


def alert_texts(key: str, before: ExperimentSummary | None,
                after: ExperimentSummary) -> list[str]:
    """The alerts one rollup raises for experiment ``key``: its health turned failing, a
    guardrail now fails, a treatment arm's decision changed (from a decision, not from none:
    a first rollup only alerts on failures)."""
    out = []
    if after.health_status == "fail" and (before is None or before.health_status != "fail"):
        out.append(f"{key}: health is failing — {after.health_note or 'see the checklist'}; "
                   "its lifts and verdicts are untrusted")
    for name, state in after.guardrails.items():
        if state == "fails" and (before is None or before.guardrails.get(name) != "fails"):
            out.append(f"{key}: guardrail {name} fails (the loss exceeds its margin)")
    for arm, outcome in after.decisions.items():
        old = None if before is None else before.decisions.get(arm)
        if old is not None and old != outcome:
            out.append(f"{key}: decision for {arm} changed from "
                       f"{OUTCOME_LABELS.get(old, old)} to {OUTCOME_LABELS.get(outcome, outcome)}")
    return out


def post(url: str, text: str, *, retries: int = RETRIES, backoff: float = BACKOFF_SECONDS,
         timeout: float = TIMEOUT_SECONDS, sleep: Callable[[float], None] = time.sleep) -> bool:
    """POST ``{"text": text}`` to ``url``; a connection error, a timeout or an HTTP 5xx or 429
    is retried up to ``retries`` times after ``backoff``, 2 x ``backoff``, ... seconds.
    True when the webhook answered 2xx; False (logged) otherwise, never raises."""
    body = json.dumps({"text": text}).encode()
    for attempt in range(retries + 1):
        request = urllib.request.Request(url, data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                if 200 <= response.status < 300:
                    return True
                problem = f"HTTP {response.status}"
        except urllib.error.HTTPError as error:
            problem = f"HTTP {error.code}"
            if error.code < 500 and error.code != 429:  # the request itself is wrong
                log.warning("alert to %s refused (%s): %s", mask_webhook(url), problem, text)
                return False
        except (OSError, ValueError) as error:  # refused, unreachable, timed out, bad URL
            problem = str(error) or type(error).__name__
        if attempt < retries:
            sleep(backoff * 2 ** attempt)
    log.warning("alert to %s not delivered after %d attempts (%s): %s", mask_webhook(url),
                retries + 1, problem, text)
    return False


def send_later(url: str, texts: Iterable[str], **options) -> threading.Thread:
    """Send ``texts`` one by one (:func:`post`) from a new thread, started and returned; it
    is not a daemon, so a command that ends meanwhile still delivers them first (bounded by
    the retries and timeouts)."""
    texts = list(texts)

    def deliver() -> None:
        for text in texts:
            post(url, text, **options)

    thread = threading.Thread(target=deliver, name="tracker-alerts", daemon=False)
    thread.start()
    return thread
