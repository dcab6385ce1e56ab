"""``tracker`` whose first rollup pauses after its first day, for tests that break the
database at that moment: it creates the file ``$TRACKER_TEST_PAUSED`` and waits (at most a
minute) for ``$TRACKER_TEST_RESUME`` to exist. Run as ``python tests/rollup/paused_cli.py
rollup ...``; the rollup code itself has no test hook."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path


def _pausing(progress, paused: Path, resume: Path):
    """``progress`` (the command's progress context), its callback pausing once after the
    first day."""

    @contextmanager
    def pausing():
        with progress() as bar:
            def step(stage: str, done: int, total: int, day) -> None:
                bar(stage, done, total, day)
                if stage == "day" and not paused.exists():
                    paused.touch()
                    deadline = time.monotonic() + 60
                    while not resume.exists() and time.monotonic() < deadline:
                        time.sleep(0.05)

            yield step

    return pausing


if __name__ == "__main__":
    from tracker.cli import main
    from tracker.cli import rollup as command

    command.rollup_progress = _pausing(command.rollup_progress,
                                     Path(os.environ["TRACKER_TEST_PAUSED"]),
                                     Path(os.environ["TRACKER_TEST_RESUME"]))
    main()
