"""``tracker`` whose first rollup pauses after its first day, for tests that break the
database at that moment: it creates the file ``$TRACKER_TEST_PAUSED`` and waits (at most a
minute) for ``$TRACKER_TEST_RESUME`` to exist. Run as ``python tests/rollup/paused_cli.py
rollup ...``; the rollup code itself has no test hook."""

from __future__ import annotations

import os
import time
from pathlib import Path


def _pausing(bar, paused: Path, resume: Path):
    """``bar`` (the command's progress callback), pausing once after the first day."""

    def progress(stage: str, done: int, total: int, day) -> None:
        bar(stage, done, total, day)
        if stage == "day" and not paused.exists():
            paused.touch()
            deadline = time.monotonic() + 60
            while not resume.exists() and time.monotonic() < deadline:
                time.sleep(0.05)

    return progress


if __name__ == "__main__":
    from tracker.cli import main
    from tracker.cli import rollup as command

    command._progress_bar = _pausing(command._progress_bar,
                                     Path(os.environ["TRACKER_TEST_PAUSED"]),
                                     Path(os.environ["TRACKER_TEST_RESUME"]))
    main()
