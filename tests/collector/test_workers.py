"""``tracker serve --workers 2``: ``/metrics`` counts the requests of every worker process,
whichever worker answers the scrape (prometheus_client's multiprocess mode)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.collector.server import Subprocess, make_keys, sample, scrape
from tests.collector.test_api import wire
from tests.helpers import impression, make_experiment


def _access_pids(log: Path) -> dict[str, int]:
    """request id -> pid of the worker that answered it, from the JSON access lines."""
    pids = {}
    for line in log.read_text().splitlines():
        if line.startswith("{") and '"event": "access"' in line:
            record = json.loads(line)
            pids[record["request_id"]] = record["pid"]
    return pids


def test_metrics_add_up_the_requests_of_every_worker(settings, tracker, tmp_path):
    make_experiment(tracker)
    keys = make_keys(settings.database_url)
    log, temp = tmp_path / "serve.log", tmp_path / "tmp"
    temp.mkdir()
    server = Subprocess(settings.database_url, workers=2, log=log,
                        env={"TMPDIR": str(temp)}).start()  # where the server makes its folder
    headers = {"Authorization": f"Bearer {keys.ingest}"}

    def send(i: int) -> int:  # a new connection per request: the workers share the accepts
        return httpx.post(f"{server.base}/v1/impressions", json=wire(impression(i)),
                          headers={**headers, "X-Request-ID": f"send-{i}"},
                          timeout=30).status_code

    try:
        sent = 0
        with ThreadPoolExecutor(8) as pool:
            while sent < 2000:
                assert set(pool.map(send, range(sent, sent + 40))) == {200}
                sent += 40
                pids = {pid for rid, pid in _access_pids(log).items() if rid.startswith("send")}
                if len(pids) == 2:
                    break
        assert len(pids) == 2, "every request went to one worker"
        (folder,) = temp.glob("tracker-prometheus-*")  # the server's own temporary folder
        assert list(folder.glob("*.db"))
        answered_by: set[int] = set()
        for scrape_no in range(50):  # until each worker has answered a scrape
            metrics = scrape(server.base, request_id=f"scrape-{scrape_no}")
            requests = sample(metrics, "tracker_collector_requests_total",
                              route="/v1/impressions", method="POST", status="200")
            stored = sample(metrics, "tracker_collector_events_total", kind="impressions",
                            outcome="stored")
            latencies = sample(metrics, "tracker_collector_request_duration_seconds_count",
                               route="/v1/impressions")
            assert (requests, stored, latencies) == (sent, sent, sent)
            answered_by.add(_access_pids(log)[f"scrape-{scrape_no}"])
            if answered_by == pids:
                break
        assert answered_by == pids
    finally:
        server.stop()
    assert not list(temp.iterdir())  # the folder goes with the server
