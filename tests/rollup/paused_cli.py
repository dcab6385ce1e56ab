"""``tracker`` whose first rollup pauses after its first day, for tests that break the
database at that moment: it creates the file ``$TRACKER_TEST_PAUSED`` and waits (at most a
minute) for ``$TRACKER_TEST_RESUME`` to exist. Run as ``python tests/rollup/paused_cli.py
rollup ...``; the rollup code itself has no test hook."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tracker import cli

_paused, _resume = Path(os.environ["TRACKER_TEST_PAUSED"]), Path(os.environ["TRACKER_TEST_RESUME"])
_bar = cli._progress_bar


def _pause_once(stage: str, done: int, total: int, day) -> None:
    _bar(stage, done, total, day)
    if stage == "day" and not _paused.exists():
        _paused.touch()
        deadline = time.monotonic() + 60
        while not _resume.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


cli._progress_bar = _pause_once

if __name__ == "__main__":
    cli.main()
