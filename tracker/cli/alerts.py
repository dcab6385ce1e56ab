"""``tracker alerts``: check the webhook the rollup sends alerts to."""

from __future__ import annotations

import click


@click.group()
def alerts() -> None:
    """Alerts the rollup POSTs to TRACKER_ALERT_URL (health failing, a guardrail failing, a
    decision changing)."""


@alerts.command("test")
@click.option("--url", help="Webhook to try (default: TRACKER_ALERT_URL).")
def alerts_test(url: str | None) -> None:
    """POST a test message ({"text": ...}) to the webhook, with the rollup's retries, and say
    whether it arrived (exit 1 when it did not)."""
    import socket

    from tracker.alerts import post
    from tracker.cli.common import settings_from_env

    target = url or settings_from_env().alert_url
    if target is None:
        raise click.UsageError("TRACKER_ALERT_URL is not set: set it (e.g. a Slack incoming "
                               "webhook) or give --url")
    if post(target, f"tracker alert test from {socket.gethostname()}: alerts reach this "
                    "channel"):
        click.echo("alert delivered")
        return
    click.echo("alert NOT delivered (see the warning above); check the URL and that the "
               "webhook accepts JSON POSTs", err=True)
    raise SystemExit(1)
