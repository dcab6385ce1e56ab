from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.collector.server import Keys, in_thread, make_keys
from tests.helpers import make_experiment
from tracker import Tracker


@dataclass
class Running:
    base: str
    keys: Keys
    settings: object
    tracker: Tracker

    def headers(self, scope: str = "ingest") -> dict[str, str]:
        return {"Authorization": f"Bearer {getattr(self.keys, scope)}"}


@pytest.fixture
def collector(settings, tracker):
    """A collector serving the test database (experiment ``home``) with two API keys."""
    make_experiment(tracker)
    keys = make_keys(settings.database_url)
    with in_thread(settings) as base:
        yield Running(base, keys, settings, tracker)
