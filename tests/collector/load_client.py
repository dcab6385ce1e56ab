"""One load-test producer: ``python -m tests.collector.load_client BASE KEY FIRST COUNT``.

Logs impressions ``imp-FIRST..`` and interactions ``evt-FIRST..`` (interleaved, as a service
would) through :class:`tracker.client.TrackerClient`; every ``--resend-every``-th chunk of
``--chunk`` events is logged a second time (a producer re-sending a batch). Prints the
client's final counters as JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta

from tracker.client import TrackerClient

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def events(first: int, count: int):
    for i in range(first, first + count):
        served = T0 + timedelta(milliseconds=i)
        impression = {"impression_id": f"imp-{i}", "experiment": "home",
                      "arm": "control" if i % 2 else "treatment", "user_id": f"u{i % 5000}",
                      "items": [f"item-{(i + j) % 3000}" for j in range(10)],
                      "served_at": served.isoformat()}
        interaction = {"event_id": f"evt-{i}", "user_id": f"u{i % 5000}",
                       "item_id": f"item-{i % 3000}", "event": "click",
                       "occurred_at": (served + timedelta(seconds=5)).isoformat()}
        if i % 2:
            interaction["impression_id"] = f"imp-{i}"
        yield impression, interaction


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("key")
    parser.add_argument("first", type=int)
    parser.add_argument("count", type=int)
    parser.add_argument("--chunk", type=int, default=250)
    parser.add_argument("--resend-every", type=int, default=20)
    args = parser.parse_args()
    client = TrackerClient(args.base, args.key, batch_size=1000, flush_interval=0.2,
                           queue_size=args.count * 3, on_full="block", block_timeout=60,
                           retry_base=0.05, retry_max=2.0, request_timeout=30,
                           close_timeout=240)
    chunk: list = []
    resent = 0
    for n, pair in enumerate(events(args.first, args.count), start=1):
        chunk.append(pair)
        client.log_impressions([pair[0]])
        client.log_interactions([pair[1]])
        if len(chunk) == args.chunk or n == args.count:
            if (n // args.chunk) % args.resend_every == 1:
                client.log_impressions([p[0] for p in chunk])
                client.log_interactions([p[1] for p in chunk])
                resent += 2 * len(chunk)
            chunk = []
    counters = client.close()
    json.dump({**counters.to_dict(), "resent": resent, "last_error": client.last_error},
              sys.stdout)


if __name__ == "__main__":
    main()
