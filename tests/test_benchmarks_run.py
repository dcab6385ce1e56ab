"""benchmarks/run.py, without running a benchmark: its command line, the figures it reads from
what the scripts print (their lines as printed), and the rows of a script that failed, timed
out or printed no figure. Nothing here is timed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("benchmarks_run", ROOT / "benchmarks" / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


run = _load()

METRICS = """\
data: 100,000 lists x 10 items, 4.99 relevant per list on average, 2.49 of them served
side by side, 3 rounds (ours evaluate, then ranx evaluate):
  ours   evaluate: median 0.109 s of [0.123, 0.109, 0.097]
  ranx   evaluate: median 1.934 s of [1.934, 1.649, 2.094]
  ratio  ranx evaluate / ours evaluate per round: 15.7x, 15.1x, 21.6x; median 15.7x
"""

INGEST = """\
PostgreSQL: 20,000 impressions x 10 items, median of 1 rounds
  path                              impressions/s  vs baseline  peak MiB
  baseline (psycopg binary COPY)           70,000        1.00x         3
  log_impressions(DataFrame)               52,000        0.74x        24
  log_impression (per call, 200 calls): median 3.97 ms, p95 5.00 ms; bare one-row INSERT + \
COMMIT: median 3.99 ms

  SQLite round 1: baseline 88,069/s, dataframe 33,165/s (0.38x)

SQLite: 20,000 impressions x 10 items, median of 1 rounds
  baseline (sqlite3 executemany)           88,069        1.00x         3
  log_impressions(DataFrame)               33,165        0.38x        30
  log_impression (per call, 200 calls): median 1.77 ms, p95 2.20 ms; bare one-row INSERT + \
COMMIT: median 0.04 ms
"""


def test_help_names_the_sizes():
    done = subprocess.run([sys.executable, "benchmarks/run.py", "--help"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    assert "--quick" in done.stdout and "--full" in done.stdout


def test_without_a_size_it_prints_the_full_commands(capsys):
    run.main([])
    out = capsys.readouterr().out
    assert ".venv/bin/python benchmarks/nightly.py --db sqlite --users 1000000 --active 20" in out
    assert "collector.py" in out and "postgresql only" in out


def test_figures_are_read_from_the_printed_lines():
    outcome = run.Outcome(run.BY_NAME["metrics"], 0, METRICS, "", 1.0)
    ((name, what, figure, target, note),) = run.rows_of(outcome)
    assert (name, figure, target) == ("metrics", "15.7x", ">= 10x")
    assert what.startswith("ranx evaluate / ours") and "ranx 1.934 s" in note


def test_each_database_section_keeps_its_own_figures():
    rows = run.ingest_figures(INGEST)
    assert [(what, figure) for what, figure, _, _ in rows] == [
        ("PostgreSQL log_impressions(frame)", "52,000/s"),
        ("PostgreSQL log_impression, a call", "3.97 ms"),
        ("SQLite log_impressions(frame)", "33,165/s"),
        ("SQLite log_impression, a call", "1.77 ms")]


def test_the_slow_connections_closing_time_is_the_first_all_closed_line():
    out = ("  0.2 s: 100 partial-header and 100 partial-body connections open\n"
           "  2.0 s: 0 partial-header and 97 partial-body connections open\n"
           "  3.1 s: 0 partial-header and 0 partial-body connections open\n"
           "  4.1 s: 0 partial-header and 0 partial-body connections open\n")
    assert run.slowloris_figures(out)[0][1] == "all 200 closed by 3.1 s"


@pytest.mark.parametrize(("returncode", "stdout", "stderr", "figure", "note"), [
    (1, "", "Traceback (most recent call last):\nValueError: boom\n", "FAILED (exit 1)",
     "ValueError: boom"),
    (None, "half a line\n", "", "timed out after 300 s", "half a line"),
    (0, "something else entirely\n", "", "no figure", "no line matches"),
])
def test_a_script_without_figures_gets_a_row_saying_why(returncode, stdout, stderr, figure,
                                                        note):
    outcome = run.Outcome(run.BY_NAME["rollup"], returncode, stdout, stderr, 300.0)
    ((name, what, shown, target, said),) = run.rows_of(outcome)
    assert (name, shown) == ("rollup", figure) and said.startswith(note)
    table = run.render([*run.rows_of(run.Outcome(run.BY_NAME["metrics"], 0, METRICS, "", 1.0)),
                        (name, what, shown, target, said)]).splitlines()
    assert table[0].split() == ["benchmark", "what", "figure", "target", "note"]
    assert len(table) == 4 and table[3].startswith("rollup ")
    assert table[2].index("15.7x") == table[3].index(figure)  # the columns line up


def test_the_set_follows_the_database():
    quick = [bench.name for bench in run.chosen(None, "sqlite")]
    assert "collector" not in quick and "spark" not in quick and "metrics" in quick
    assert "collector" in [bench.name for bench in run.chosen(None, "postgresql")]
    assert [bench.name for bench in run.chosen("spark,metrics", "sqlite")] == ["spark", "metrics"]
    with pytest.raises(SystemExit, match="unknown benchmark"):
        run.chosen("nope", "sqlite")
