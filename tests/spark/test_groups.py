"""A group's output written by its Python worker (:func:`tracker.spark.groups.write_group`):
one file per group key, replaced whole when a task runs again, nothing for an empty group."""

from __future__ import annotations

from datetime import date

import pyarrow as pa
import pyarrow.dataset as ds

from tracker.spark.groups import OUTPUT, UNIT, write_group


def _rows(users: list[str]) -> pa.Table:
    n = len(users)
    return pa.table({"kind": pa.array([UNIT] * n, pa.int8()),
                     "day": pa.array([date(2026, 3, 29)] * n, pa.date32()),
                     "key": pa.array(users), "cell": pa.array(range(1, n + 1), pa.int64()),
                     "impressions": pa.array([2] * n, pa.int64()),
                     "sums": pa.array([[0.5, 1.0]] * n, pa.list_(pa.float64())),
                     "counts": pa.array([[1.0, 1.0]] * n, pa.list_(pa.float64()))},
                    schema=OUTPUT)


def test_a_group_writes_its_rows_and_a_rerun_replaces_them_whole(tmp_path):
    key = (pa.scalar(3, pa.int32()), pa.scalar(date(2026, 3, 29)), pa.scalar(0, pa.int32()))
    first, again = _rows(["u1", "u2", "u3"]), _rows(["u1", "u2"])

    assert write_group(tmp_path, key, first).to_pydict() == {"rows": [3]}
    assert write_group(tmp_path, key, again).to_pydict() == {"rows": [2]}
    other = (pa.scalar(4, pa.int32()), key[1], key[2])
    write_group(tmp_path, other, first)

    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "group-3-2026-03-29-0.arrow", "group-4-2026-03-29-0.arrow"]
    with pa.memory_map(str(tmp_path / "group-3-2026-03-29-0.arrow")) as source:
        assert pa.ipc.open_file(source).read_all().equals(again)
    read = ds.dataset(str(tmp_path), schema=OUTPUT, format="ipc").to_table()
    assert read.num_rows == again.num_rows + first.num_rows


def test_an_empty_group_writes_nothing(tmp_path):
    key = (pa.scalar(0, pa.int32()), pa.scalar(date(2026, 3, 29)), pa.scalar(0, pa.int32()))
    assert write_group(tmp_path, key, OUTPUT.empty_table()).to_pydict() == {"rows": [0]}
    assert list(tmp_path.iterdir()) == []
