"""The dashboard (``dashboard/app.py``) with one spy, for the browser test of the charts'
fragment: each time a script run draws the decision cards, a line is appended to the file
named by ``TRACKER_TEST_DRAWN``. A full rerun of the experiment page draws them again; a rerun
of the charts' fragment alone does not."""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _count_the_decision_cards() -> None:
    """Wrap :func:`dashboard.components.decisions_and_health` (once per server process)."""
    from dashboard import components

    if getattr(components.decisions_and_health, "counted", False):
        return
    draw = components.decisions_and_health

    def counted(card, colours, *said):
        with open(os.environ["TRACKER_TEST_DRAWN"], "a") as out:
            out.write("drawn\n")
        draw(card, colours, *said)

    counted.counted = True
    components.decisions_and_health = counted


if __name__ == "__main__":  # as Streamlit runs it; never on import (pytest's doctests)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    _count_the_decision_cards()
    runpy.run_path(str(ROOT / "dashboard" / "app.py"), run_name="__main__")
