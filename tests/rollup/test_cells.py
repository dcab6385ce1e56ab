"""Cells: the rollup keys every per-user and per-group result by a cell code, and only
``tracker.rollup.cells`` knows that a cell is an arm today (issue 31, item 1)."""

from __future__ import annotations

import io
import re
import tokenize
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import sqlalchemy as sa

from tests.rollup.scenario import assert_same_tables, create, dump, make_logs
from tracker.errors import StaleState
from tracker.rollup import state
from tracker.rollup.aggregate import UnitTotals, cell_stats, crossover_mask, health, metric_rows
from tracker.rollup.cells import (
    ARM_BITS,
    KEY,
    WHOLE,
    Cells,
    assignment_of,
    unsliced,
)
from tracker.rollup.columnar import exposures
from tracker.rollup.outcomes import Layout
from tracker.store.experiments import ArmInfo, ExperimentInfo

ROOT = Path(__file__).resolve().parents[2] / "tracker"
CORE = sorted((ROOT / "rollup").glob("*.py")) + sorted((ROOT / "spark").glob("*.py"))
ARM = re.compile(r"(^|_)arms?(_|$)", re.IGNORECASE)
LOG_SOURCES = {
    # what the logs call the column a served list's cell is read from: the database's
    # impressions (``imp.arm_id``) and the lake's (``arm``), and the stored formats written
    # before cells (read on as cells)
    "rollup/queries.py", "rollup/state.py", "rollup/user_queries.py", "spark/bucket_census.py",
    "spark/buckets.py", "spark/covariates.py", "spark/frames.py", "spark/pre_period.py",
}


def _tokens(path: Path) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))


def test_no_module_of_the_rollup_but_cells_knows_that_a_cell_is_an_arm():
    """No name in ``tracker.rollup`` or ``tracker.spark`` but in ``cells.py`` says arm; a
    string may name an ``arm`` column only where the logs are read (prose may say arm)."""
    found = []
    for path in CORE:
        name = path.relative_to(ROOT).as_posix()
        if name == "rollup/cells.py":
            continue
        for token in _tokens(path):
            text, line = token.string, token.start[0]
            if token.type == tokenize.NAME and ARM.search(text):
                found.append(f"{name}:{line}: name {text}")
            elif token.type == tokenize.STRING and not text.lstrip("rbfu").startswith(
                    ('"""', "'''")) and re.search(r"\barm", text) \
                    and name not in LOG_SOURCES:
                found.append(f"{name}:{line}: string {text}")
    assert found == []


def test_the_check_sees_an_arm_where_one_is():
    """The check above is not blind: it finds the arms cells.py makes cells of, and the
    names the rollup used before cells; words that merely hold the letters pass."""
    cells = ROOT / "rollup" / "cells.py"
    names = [t.string for t in _tokens(cells) if t.type == tokenize.NAME]
    assert any(ARM.search(n) for n in names)  # ``info.arms``: what a cell is made of
    assert all(ARM.search(n) for n in ("arm", "arms", "arm_ids", "arm_stats", "_arms"))
    assert not any(ARM.search(n) for n in ("warm", "harmonic", "farms", "alarm"))


def _totals(cells: list[int], users: list[str], seed: int = 1) -> UnitTotals:
    rng = np.random.default_rng(seed)
    n = len(users)
    sums = np.asfortranarray(rng.integers(0, 4, (n, 2)).astype(float))
    counts = np.asfortranarray(np.full((n, 2), 2.0))
    return UnitTotals(pa.array(users), np.array(cells, dtype=np.int64),
                      np.full(n, 2, dtype=np.int64), sums, counts).reduce()


def test_statistics_health_and_exposure_are_keyed_by_any_cell_code():
    """Cell codes far from any arm id (slices' cells: their arm's id in the low bits) group
    as arms do: the same statistics for the same users under other codes, crossover across
    arms."""
    layout = Layout([("ndcg", 5), ("hit_rate", 5)])
    users = ["a", "b", "c", "d", "d"]
    small = _totals([1, 1, 2, 2, 1], users)
    one, two = 1 | 7 << ARM_BITS, 2 | 7 << ARM_BITS  # one slice of arms 1 and 2
    big = _totals([one, one, two, two, one], users)
    for a, b in zip(cell_stats(small, [1, 2]), cell_stats(big, [one, two]), strict=True):
        np.testing.assert_array_equal(a.sum, b.sum)
        np.testing.assert_array_equal(a.users, b.users)
    assert health(big).cells == {one: (3, 6, 1), two: (2, 4, 1)}
    assert health(big).crossover_users == 1  # "d", in both arms
    named = Cells((1, 2), {}, {7: ("surface", "home")})
    rows = metric_rows(cell_stats(big, [two]), layout, named)
    assert [(r[KEY], r["segment"], r["slice"], r["users"]) for r in rows] == \
        [(2, "surface", "home", 1)] * 2
    served = np.array([[0, 1], [1, -1], [2, 0]])
    by_cell = exposures(served, np.array([2**41, 2**41, 5]), [1, 2])
    assert sorted(by_cell) == [5, 2**41]
    codes, counts = by_cell[2**41]
    assert codes.tolist() == [0, 1] and counts.tolist() == [[1, 1], [1, 2]]


def test_a_users_slices_of_one_arm_are_no_crossover_and_count_once_for_the_experiment():
    """A user in arm 1 and in two of arm 1's slices is one user of arm 1, no crossover;
    a user in a slice of arm 1 and in arm 2 crossed over, in every cell they are in. The
    experiment's users and impressions are counted once, from the whole arms."""
    cells = [1, 1 | 3 << ARM_BITS, 1 | 4 << ARM_BITS,  # "a": arm 1, two of its slices
             1 | 3 << ARM_BITS, 2,  # "b": a slice of arm 1 and arm 2
             2, 2 | 3 << ARM_BITS]  # "c": arm 2 and a slice of it
    totals = _totals(cells, ["a", "a", "a", "b", "b", "c", "c"])
    mask = crossover_mask(totals)
    assert [u for u, c in zip(totals.users.to_pylist(), mask, strict=True) if c] == \
        ["b", "b"]  # both of b's rows; none of a's or c's
    counts = health(totals)
    assert counts.users == 3 and counts.crossover_users == 1
    assert counts.impressions == 2 * 3  # rows of arms 1 and 2 whole: 2 impressions each
    assert counts.cells[1 | 3 << ARM_BITS] == (2, 4, 1)  # "a" and "b", "b" crossed
    assert assignment_of(np.array(cells)).tolist() == [1, 1, 1, 1, 2, 2, 2]
    assert unsliced(np.array(cells)).tolist() == [True, False, False, False, True, True,
                                                  False]


def test_cells_name_their_rows_in_the_reports_tables_and_back():
    plain = Cells((3, 9), {"control": 3, "two-tower": 9})
    whole = {"segment": "", "slice": ""}  # a whole arm's row: in no slice
    assert plain.code(plain.stored(17)) == 17 and plain.stored(WHOLE) == {KEY: 0, **whole}
    rows = plain.keyed({9: b"x", WHOLE: b"catalog", 3: b"y"})
    assert [key for key, _ in rows] == [{KEY: 0, **whole}, {KEY: 3, **whole},
                                        {KEY: 9, **whole}]
    assert plain.coded(rows) == {0: b"catalog", 3: b"y", 9: b"x"}
    lists = pa.table({"id": [1, 2], "arm": pa.array([4, 9], pa.int32()), "user": ["u", "v"]})
    placed = plain.place(lists)
    assert placed.column_names == ["id", "cell", "user"]
    assert placed["cell"].type == pa.int64() and placed["cell"].to_pylist() == [4, 9]
    assert plain.of_keys(pa.array(["two-tower", "undeclared", "control"])).to_pylist() == \
        [9, None, 3]


def _sliced_info(levels) -> ExperimentInfo:
    arms = (ArmInfo("control", 0.5, 3), ArmInfo("two-tower", 0.5, 9))
    return ExperimentInfo(1, "home", "", "", "running", None, None, "control", arms,
                          timedelta(hours=1), None, "ignore", "UTC", (5,),
                          datetime(2026, 1, 1, tzinfo=UTC), levels=levels)


def test_a_list_falls_in_its_arm_and_in_its_slice_of_each_list_dimension():
    """Levels keep their slices; other values fold into (other), a missing key is (none);
    every slice's row names it and comes back to its code."""
    cells = Cells.of(_sliced_info((("surface", ("search", "home")), ("device", ("ios",)))))
    lists = pa.table({"id": [1, 2, 3, 4], "arm": pa.array([3, 9, 3, 9], pa.int32()),
                      "slice:device": ["ios", None, "android", "ios"],
                      "slice:surface": ["home", "search", "pdp", None]})
    placed = cells.place(lists)
    assert placed.column_names == ["id", "cell", "cell:device", "cell:surface"]
    matrix = Cells.matrix(placed)
    assert matrix.shape == (4, 3) and matrix[:, 0].tolist() == [3, 9, 3, 9]
    assert assignment_of(matrix).tolist() == [[3] * 3, [9] * 3, [3] * 3, [9] * 3]
    named = [[cells.stored(code) for code in row] for row in matrix]
    assert [[(n["segment"], n["slice"]) for n in row[1:]] for row in named] == [
        [("device", "ios"), ("surface", "home")],
        [("device", "(none)"), ("surface", "search")],
        [("device", "(other)"), ("surface", "(other)")],
        [("device", "ios"), ("surface", "(none)")]]
    assert all(cells.code(n) == code for row, codes in zip(named, matrix, strict=True)
               for n, code in zip(row, codes, strict=True))
    # the report lists every arm, then each slice of every arm: 2 + 2 x (3 + 4)
    assert len(cells.codes) == 16 and cells.codes[:2] == (3, 9)
    assert cells.keys == ("device", "surface")  # by name, whatever the order declared
    with pytest.raises(StaleState, match="'tablet' of 'device'"):
        cells.code({KEY: 3, "segment": "device", "slice": "tablet"})


def _to_before_cells(engine: sa.Engine) -> int:
    """Rewrite every stored unit part as a release before cells wrote it (``units/1``: the
    cell named ``arm_id``)."""
    old = {state.UNITS: "units/1"}
    rewritten = 0
    with engine.begin() as conn:
        for table in ("rollup_units",):
            keys = [c for c in sa.inspect(conn).get_pk_constraint(table)["constrained_columns"]]
            rows = conn.execute(sa.text(f"SELECT {', '.join(keys)}, data FROM {table}")).all()
            for *key, data in rows:
                fmt = state.format_of(bytes(data))
                if fmt not in old:
                    continue
                stored = state.read(bytes(data), fmt)
                back = state.write(stored.rename_columns(
                    ["arm_id" if n == "cell" else n for n in stored.column_names]), old[fmt],
                    **{k.decode().removeprefix("tracker."): v.decode()
                       for k, v in stored.schema.metadata.items() if k != state.FORMAT})
                conn.execute(sa.text(
                    f"UPDATE {table} SET data = :data WHERE "
                    + " AND ".join(f"{k} = :{k}" for k in keys)),
                    dict(zip(keys, key, strict=True), data=bytes(back)))
                rewritten += 1
    return rewritten


def test_state_stored_before_cells_reads_on_and_ends_in_the_tables_of_a_full_rollup(tracker):
    """A database rolled up by the release before cells (its units in the older format)
    rolls up on: a later batch's incremental run reads them and ends in the tables of one
    ``--full`` rollup."""
    create(tracker)
    imps, events = make_logs(7, days=3, users=10, impressions=50)
    events.sort(key=lambda r: r["occurred_at"])
    now = max(r["served_at"] for r in imps) + timedelta(hours=1)  # the last day provisional
    half = len(events) // 2
    tracker.log_impressions(imps, on_invalid="all_or_nothing")
    tracker.log_interactions(events[:half], on_invalid="all_or_nothing")
    tracker.rollup("home", now=now)
    assert _to_before_cells(tracker.engine) > 0
    tracker.log_interactions(events[half:], on_invalid="all_or_nothing")
    tracker.rollup("home", now=now)
    tracker.rollup("home", now=now + timedelta(days=2))  # every day final
    incremental, units = dump(tracker.engine, without=("rollup_units",)), _units(tracker)
    assert any(fmt == "units/1" for fmt, _ in units.values())  # some are read, not rewritten
    tracker.rollup("home", full=True, now=now + timedelta(days=2))
    assert_same_tables(dump(tracker.engine, without=("rollup_units",)), incremental)
    rebuilt = _units(tracker)
    assert rebuilt.keys() == units.keys()
    for key, (_, totals) in units.items():
        want = rebuilt[key][1]
        assert totals.users.equals(want.users), key
        np.testing.assert_array_equal(totals.cells, want.cells)
        np.testing.assert_array_equal(totals.impressions, want.impressions)
        np.testing.assert_allclose(totals.sums, want.sums, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(totals.counts, want.counts)


def _units(tracker) -> dict:
    """Every stored unit row's format and decoded totals, by (day, cumulative)."""
    layout = Layout.for_cutoffs(list(tracker.experiment("home").cutoffs))
    with tracker.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT day, cumulative, data FROM rollup_units "
                                    "ORDER BY day, cumulative, part")).all()
    out: dict = {}
    for day, cumulative, data in rows:
        out.setdefault((str(day), bool(cumulative)), []).append(bytes(data))
    return {key: (state.format_of(parts[0]), UnitTotals.decode(parts, layout))
            for key, parts in out.items()}


def test_a_format_older_than_the_one_before_is_still_refused():
    data = state.write(pa.table({"arm_id": [1]}), "units/0")
    with pytest.raises(StaleState, match="units/0"):
        state.read(data, state.UNITS)
