"""``tracker export``: the database's logs as Parquet in the lake layout, on both databases."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tests.lake.logs import IMPRESSIONS, INTERACTIONS, load
from tracker.cli import main
from tracker.errors import NotFound, TrackerError
from tracker.lake import layout
from tracker.lake.export import MARKER, export_logs
from tracker.store.models import Impression, Interaction


def rows_of(folder: Path) -> list[dict]:
    """Every row of every Parquet file under ``folder``, as Python values."""
    rows = []
    for path in sorted(folder.rglob("*.parquet")):
        rows += pq.read_table(path).to_pylist()
    return rows


def received(engine, model, key) -> dict[str, object]:
    """Each logged row's receipt time in the database, by its client id."""
    with engine.connect() as conn:
        return dict(conn.execute(sa.select(key, model.received_at)).all())


def without_received(rows: dict[str, dict]) -> dict[str, object]:
    """Pop the rows' ``received_at`` (no field of a logged record) and return them."""
    return {key: row.pop("received_at") for key, row in rows.items()}


def by_id(rows: list[dict], key: str) -> dict[str, dict]:
    out = {row[key]: dict(row) for row in rows}
    assert len(out) == len(rows), "an id written twice"
    return out


def expected_impressions(experiments: set[str]) -> dict[str, dict]:
    return {r["impression_id"]: {**r, "context": r["context"]} for r in IMPRESSIONS
            if r["experiment"] in experiments}


@pytest.fixture
def logged(tracker):
    load(tracker)
    return tracker


@pytest.mark.parametrize("batch_rows", [2, 50_000], ids=["batches-of-two", "one-batch"])
def test_every_field_comes_back_as_logged(logged, tmp_path, batch_rows):
    done = export_logs(logged.engine, tmp_path / "imp", tmp_path / "int", batch_rows=batch_rows)
    assert (done.impressions, done.interactions) == (len(IMPRESSIONS), len(INTERACTIONS))
    assert done.experiments == ("exp-a", "exp-b")
    got = by_id(rows_of(tmp_path / "imp"), "impression_id")
    # the receipt time as stored (the lake's optional received_at: CUPED's history cut)
    assert without_received(got) == received(logged.engine, Impression,
                                             Impression.impression_key)
    for key, record in expected_impressions({"exp-a", "exp-b"}).items():
        row = got[key]
        context = row.pop("context")
        assert json.loads(context) == record["context"] if context is not None \
            else record["context"] is None, key
        assert row == {k: v for k, v in record.items() if k != "context"}, key
    events = by_id(rows_of(tmp_path / "int"), "event_id")
    assert without_received(events) == received(logged.engine, Interaction,
                                                Interaction.event_key)
    assert events == {r["event_id"]: r for r in INTERACTIONS}


def test_the_files_have_exactly_the_documented_schema(logged, tmp_path):
    export_logs(logged.engine, tmp_path / "imp", tmp_path / "int")
    for folder, schema in ((tmp_path / "imp", layout.IMPRESSIONS),
                           (tmp_path / "int", layout.INTERACTIONS)):
        files = sorted(folder.rglob("*.parquet"))
        assert files
        for path in files:
            assert pq.read_schema(path).remove_metadata() == schema, path


def test_one_folder_per_utc_day_and_one_file_per_experiment(logged, tmp_path):
    export_logs(logged.engine, tmp_path / "imp", tmp_path / "int", batch_rows=2)
    imp = sorted(str(p.relative_to(tmp_path / "imp")) for p in (tmp_path / "imp").rglob("*.*"))
    # the last µs of 1 October is 1 October; the next µs, and 5 hours on, 2 October
    assert imp == [MARKER, "day=2026-10-01/part-0.parquet", "day=2026-10-01/part-1.parquet",
                   "day=2026-10-02/part-0.parquet"]
    interactions = sorted(str(p.relative_to(tmp_path / "int"))
                          for p in (tmp_path / "int").rglob("*.*"))
    assert interactions == [MARKER, "day=2026-10-01/part-0.parquet",
                            "day=2026-10-02/part-0.parquet", "day=2026-10-04/part-0.parquet",
                            "day=2026-10-05/part-0.parquet"]
    # the folders read as a hive-partitioned dataset too
    dataset = ds.dataset(tmp_path / "imp", format="parquet", partitioning="hive")
    assert dataset.to_table().num_rows == len(IMPRESSIONS)


def test_one_experiment_exports_its_impressions_only_and_every_interaction(logged, tmp_path):
    done = export_logs(logged.engine, tmp_path / "imp", tmp_path / "int", "exp-b")
    assert done.experiments == ("exp-b",)
    assert set(by_id(rows_of(tmp_path / "imp"), "impression_id")) == {"imp-b"}
    assert len(rows_of(tmp_path / "int")) == len(INTERACTIONS)


def test_a_non_empty_directory_is_refused_unless_overwrite(logged, tmp_path):
    export_logs(logged.engine, tmp_path / "imp", tmp_path / "int", "exp-b")
    with pytest.raises(TrackerError, match="is not empty.*--overwrite"):
        export_logs(logged.engine, tmp_path / "imp", tmp_path / "int")
    assert {r["experiment"] for r in rows_of(tmp_path / "imp")} == {"exp-b"}
    export_logs(logged.engine, tmp_path / "imp", tmp_path / "int", overwrite=True)
    assert len(rows_of(tmp_path / "imp")) == len(IMPRESSIONS)
    assert len(rows_of(tmp_path / "int")) == len(INTERACTIONS)


def test_overwrite_replaces_a_bucketed_export_with_a_plain_one(logged, tmp_path):
    export_logs(logged.engine, tmp_path / "imp", tmp_path / "int", buckets=3)
    export_logs(logged.engine, tmp_path / "imp", tmp_path / "int", overwrite=True)
    assert not list(tmp_path.rglob("bucket=*"))
    assert len(rows_of(tmp_path / "imp")) == len(IMPRESSIONS)
    assert (tmp_path / "imp" / MARKER).is_file() and (tmp_path / "int" / MARKER).is_file()


def _notes_beside_the_export(imp: Path) -> Path:
    (imp / "notes.txt").write_text("mine")
    return imp / "notes.txt"


def _a_file_in_a_day_folder(imp: Path) -> Path:
    day = next(imp.glob("day=*"))
    (day / "summary.csv").write_text("mine")
    return day / "summary.csv"


def _a_folder_named_like_a_day_holding_other_files(imp: Path) -> Path:
    (imp / "day=2020-01-01" / "raw").mkdir(parents=True)
    (imp / "day=2020-01-01" / "raw" / "part-0.parquet").write_text("mine")
    return imp / "day=2020-01-01" / "raw" / "part-0.parquet"


def _no_marker(imp: Path) -> Path:
    (imp / MARKER).unlink()
    return next(imp.rglob("*.parquet"))


def _the_other_logs_marker(imp: Path) -> Path:
    (imp / MARKER).write_text(json.dumps({"format": "tracker-export/1", "log": "interactions"}))
    return next(imp.rglob("*.parquet"))


def _a_link_to_a_folder_outside(imp: Path) -> Path:
    outside = imp.parent / "elsewhere"
    (outside / "part-0.parquet").parent.mkdir()
    (outside / "part-0.parquet").write_text("mine")
    (imp / "day=2020-01-01").symlink_to(outside, target_is_directory=True)
    return outside / "part-0.parquet"


@pytest.mark.parametrize("plant", [
    pytest.param(_notes_beside_the_export, id="a-file-beside-an-export-is-named-and-kept"),
    pytest.param(_a_file_in_a_day_folder, id="a-foreign-file-in-a-day-folder-is-kept"),
    pytest.param(_a_folder_named_like_a_day_holding_other_files,
                 id="a-foreign-folder-inside-a-day-folder-is-kept"),
    pytest.param(_no_marker, id="files-without-the-marker-are-not-the-exports"),
    pytest.param(_the_other_logs_marker, id="the-interactions-lake-is-not-the-impressions"),
    pytest.param(_a_link_to_a_folder_outside, id="a-symbolic-link-is-not-followed"),
])
def test_overwrite_deletes_nothing_it_did_not_write(logged, tmp_path, plant):
    export_logs(logged.engine, tmp_path / "imp", tmp_path / "int", "exp-b")
    export_logs(logged.engine, tmp_path / "int-2", tmp_path / "int-3")  # untouched pair
    kept = plant(tmp_path / "imp")
    before = {p: p.read_bytes() for p in (tmp_path / "imp").rglob("*") if p.is_file()}
    before_int = {p: p.read_bytes() for p in (tmp_path / "int").rglob("*") if p.is_file()}
    with pytest.raises(TrackerError, match="left alone|did not write") as refused:
        export_logs(logged.engine, tmp_path / "imp", tmp_path / "int", overwrite=True)
    assert str(tmp_path / "imp") in str(refused.value)
    assert kept.is_file()
    assert {p: p.read_bytes() for p in (tmp_path / "imp").rglob("*") if p.is_file()} == before
    # the other directory is checked before either is emptied
    assert {p: p.read_bytes() for p in (tmp_path / "int").rglob("*") if p.is_file()} \
        == before_int


def test_overwrite_of_the_folder_holding_the_sqlite_database_deletes_nothing(tmp_path):
    """The issue's case: ``tracker export --overwrite`` pointed at the folder of tracker.db
    deleted it (and notes.txt); it is refused, naming a file it did not write."""
    home = tmp_path / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'tracker.db'}"
    engine = sa.create_engine(url)
    from tracker.store import schema
    schema.upgrade(engine)
    engine.dispose()
    (home / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in home.iterdir()}
    result = CliRunner().invoke(main, ["export", "--impressions", str(home), "--interactions",
                                       str(tmp_path / "int"), "--overwrite"],
                                env={"TRACKER_DATABASE_URL": url})
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and len(result.output.splitlines()) == 1
    assert "did not write" in result.output or "left alone" in result.output
    assert {p.name: p.read_bytes() for p in home.iterdir()} == before
    assert not (tmp_path / "int").exists()


@pytest.mark.parametrize(("imp", "int_"), [("same", "same"), ("outer", "outer/inner")],
                         ids=["same-directory", "one-inside-the-other"])
def test_overlapping_directories_are_refused(logged, tmp_path, imp, int_):
    with pytest.raises(TrackerError, match="must be apart"):
        export_logs(logged.engine, tmp_path / imp, tmp_path / int_)


def test_an_unknown_experiment_is_named(logged, tmp_path):
    with pytest.raises(NotFound, match="nope"):
        export_logs(logged.engine, tmp_path / "imp", tmp_path / "int", "nope")


def test_an_empty_database_exports_no_file(tracker, tmp_path):
    done = export_logs(tracker.engine, tmp_path / "imp", tmp_path / "int")
    assert (done.impressions, done.interactions, done.impression_files) == (0, 0, 0)
    assert not list(tmp_path.rglob("*.parquet"))


def test_the_command_exports_one_experiment(logged, tmp_path, monkeypatch):
    monkeypatch.setenv("TRACKER_DATABASE_URL", logged.settings.database_url)
    args = ["export", "exp-a", "--impressions", str(tmp_path / "imp"),
            "--interactions", str(tmp_path / "int"), "--format", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["impressions"] == 5
    assert {r["experiment"] for r in rows_of(tmp_path / "imp")} == {"exp-a"}
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 1 and "is not empty" in again.output


@pytest.mark.parametrize("batch_rows", [1, 50_000], ids=["row-groups-of-one", "one-batch"])
def test_a_bucketed_export_holds_the_same_rows_each_file_one_bucket_of_users(logged, tmp_path,
                                                                            batch_rows):
    export_logs(logged.engine, tmp_path / "plain-imp", tmp_path / "plain-int")
    done = export_logs(logged.engine, tmp_path / "imp", tmp_path / "int", buckets=3,
                       batch_rows=batch_rows)
    assert (done.impressions, done.interactions) == (len(IMPRESSIONS), len(INTERACTIONS))
    for log, key in (("imp", "impression_id"), ("int", "event_id")):
        assert by_id(rows_of(tmp_path / log), key) == by_id(rows_of(tmp_path / f"plain-{log}"),
                                                             key)
        files = sorted((tmp_path / log).rglob("*.parquet"))
        seen = set()
        for path in files:
            day, bucket = path.parent.parent.name, path.parent.name
            assert day.startswith("day=") and bucket.startswith("bucket="), path
            meta = pq.read_metadata(path).metadata
            assert meta[layout.BUCKETS] == b"3" and meta[layout.BUCKET] == bucket[7:].encode()
            users = pq.read_table(path)["user_id"]
            assert set(layout.user_bucket(users, 3).tolist()) == {int(bucket[7:])}, path
            assert pq.read_schema(path).remove_metadata() == layout.SCHEMAS[
                "impressions" if log == "imp" else "interactions"]
            seen.add(int(bucket[7:]))
        assert len(seen) > 1, "the users all fell into one bucket: the test proves little"


def test_the_bucket_of_a_user_is_fnv1a_of_its_utf8_bytes_modulo_the_count():
    def fnv1a(text: str) -> int:  # the textbook loop, one byte at a time
        value = 0xCBF29CE484222325
        for byte in text.encode():
            value = ((value ^ byte) * 0x100000001B3) % 2**64
        return value

    users = ["", "u1", "été-✓", "a" * 70, "user-42"]
    array = pa.array(["pad", *users]).slice(1)  # an offset into the buffers
    for count in (1, 7, 2**62):
        assert layout.user_bucket(array, count).tolist() == [fnv1a(u) % count for u in users]


def test_tracker_export_buckets_on_the_command_line(logged, tmp_path, monkeypatch):
    monkeypatch.setenv("TRACKER_DATABASE_URL", logged.settings.database_url)
    done = CliRunner().invoke(main, ["export", "--impressions", str(tmp_path / "imp"),
                                     "--interactions", str(tmp_path / "int"), "--buckets", "2"])
    assert done.exit_code == 0, done.output
    assert all(p.parent.name.startswith("bucket=") for p in tmp_path.rglob("*.parquet"))
    wrong = CliRunner().invoke(main, ["export", "--impressions", str(tmp_path / "a"),
                                      "--interactions", str(tmp_path / "b"), "--buckets", "0"])
    assert wrong.exit_code == 2 and "--buckets" in wrong.output
