"""The ``--every`` loop: failures reported and retried, a signal ends it (pure: no database)."""

from __future__ import annotations

import os
import signal

import pytest

from tracker.rollup.schedule import run_every


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, id="sigint"),
                                 pytest.param(signal.SIGTERM, id="sigterm")])
def test_a_failed_run_is_reported_and_retried_and_a_signal_ends_the_loop(sig):
    before = signal.getsignal(sig)
    calls: list[int] = []
    reported: list[tuple[str, float]] = []

    def job() -> None:
        calls.append(len(calls))
        if len(calls) <= 2:
            raise ConnectionError(f"blip {len(calls)}")
        os.kill(os.getpid(), sig)  # stands for `docker stop` during the third run

    stopped = run_every(job, 0.01, lambda error, wait: reported.append((str(error), wait)))
    assert stopped == sig.name
    assert reported == [("blip 1", 0.01), ("blip 2", 0.01)]
    assert len(calls) == 3
    assert signal.getsignal(sig) is before
