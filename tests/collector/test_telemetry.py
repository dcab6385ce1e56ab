"""The multiprocess folder ``tracker serve`` prepares for ``/metrics`` (no server needed; the
live two-worker test is tests/collector/test_workers.py)."""

from __future__ import annotations

import os

import pytest

from tracker.collector.telemetry import MULTIPROC_ENV, multiprocess_dir
from tracker.errors import TrackerError


def test_a_given_folder_is_emptied_of_an_earlier_runs_files_only(tmp_path, monkeypatch):
    for name in ("counter_4242.db", "histogram_4242.db", "gauge_livesum_7.db", "notes.txt"):
        (tmp_path / name).write_text("x")
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    with multiprocess_dir(workers=2) as folder:
        assert folder == tmp_path
        assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert os.environ[MULTIPROC_ENV] == str(tmp_path)  # the operator's setting stays


def test_a_given_folder_that_does_not_exist_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path / "missing"))
    with (pytest.raises(TrackerError, match=f"{MULTIPROC_ENV}=.*missing.* is not a folder"),
          multiprocess_dir(workers=2)):
        pass


def test_several_workers_get_a_temporary_folder_for_the_servers_lifetime(tmp_path,
                                                                          monkeypatch):
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    with multiprocess_dir(workers=2) as folder:
        assert folder is not None and folder.parent == tmp_path and folder.is_dir()
        assert os.environ[MULTIPROC_ENV] == str(folder)  # what the workers inherit
    assert not folder.exists()
    assert MULTIPROC_ENV not in os.environ


def test_one_worker_keeps_its_series_in_memory(monkeypatch):
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    with multiprocess_dir(workers=1) as folder:
        assert folder is None
        assert MULTIPROC_ENV not in os.environ
