"""The benchmarks' figures for the current tree in one table: a curated set of the scripts in
this folder, each run as benchmarks/README.md documents it (a subprocess of this Python, from
the repository root, with this tree first on ``PYTHONPATH``), its key figures read from what it
prints, beside their target and the peer measured in the same run (ranx, the bare driver
write, ``rollup --full``, ``math.fsum``, the run without dimensions or without the heavy user).

    .venv/bin/python benchmarks/run.py --quick                     # small sizes, ~4 min, SQLite
    .venv/bin/python benchmarks/run.py --quick --db postgresql     # the database ones on PG
    .venv/bin/python benchmarks/run.py --quick --only spark,cuped_rollup   # not in the default set
    .venv/bin/python benchmarks/run.py                             # the full-size commands
    .venv/bin/python benchmarks/run.py --full [--only nightly]     # run them (hours)

``--quick`` runs each script at a small size (at most 300 s each): ratios and rates are
measured as at full size, but a target in seconds for 1M impressions does not apply to
100,000; the note says the size. Every database lives in a temporary folder (the children's
``TMPDIR``) or, with ``--db postgresql``, in a schema the script drops
(``TRACKER_BENCH_PG_URL`` names the server; ``--pg-url`` sets it). A script that fails, times
out or prints no figure gets a row saying so; the others still run. Printed: one row per
figure (benchmark, what, figure, target, note), then the commit, the date and the seconds each
script took. first_day.py and next_day.py (rows generated once, then timed runs), cuped.py and
state.py are not run here.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICK_TIMEOUT = 300.0  # seconds a script may take at --quick before it is stopped

Figure = tuple[str, str, str, str]  # what, figure, target, note


class NoFigure(Exception):
    """A script's output without the line a figure is read from."""


def grab(pattern: str, text: str) -> tuple[str, ...]:
    """The groups of ``pattern``'s last match in ``text`` (the summary comes last)."""
    found = list(re.finditer(pattern, text, re.MULTILINE))
    if not found:
        raise NoFigure(f"no line matches {pattern!r}")
    return found[-1].groups()


# ------------------------------------------------------------------ what each script prints

def metrics_figures(out: str) -> list[Figure]:
    (n,) = grab(r"^data: ([\d,]+) lists", out)
    (ratio,) = grab(r"per round: .*; median ([\d.]+x)", out)
    (ours,) = grab(r"^  ours   evaluate: median ([\d.]+ s)", out)
    (theirs,) = grab(r"^  ranx   evaluate: median ([\d.]+ s)", out)
    return [("ranx evaluate / ours, 6 metrics", ratio, ">= 10x",
             f"ours {ours}, ranx {theirs}; {n} lists")]


def ingest_figures(out: str) -> list[Figure]:
    rows = []
    for db, target in (("PostgreSQL", ">= 50,000/s"), ("SQLite", ">= 25,000/s")):
        if f"\n{db}: " not in "\n" + out:
            continue
        part = ("\n" + out).split(f"\n{db}: ", 1)[1].split("\n\n", 1)[0]  # its section
        (n,) = grab(r"^([\d,]+) impressions x 10 items", part)
        tool, base = grab(r"^  baseline \(\S+ (.*?)\)\s+([\d,]+)", part)
        frame, ratio = grab(r"^  log_impressions\(DataFrame\)\s+([\d,]+)\s+([\d.]+x)", part)
        call, bare = grab(r"per call.*?median ([\d.]+ ms).*?COMMIT: median ([\d.]+ ms)", part)
        rows += [(f"{db} log_impressions(frame)", f"{frame}/s", target,
                  f"{ratio} of bare {tool}, {base}/s; {n}"),
                 (f"{db} log_impression, a call", call,
                  "< 2 ms" if db == "SQLite" else "-", f"bare INSERT + COMMIT {bare}")]
    if not rows:
        raise NoFigure("no database section")
    return rows


def rollup_figures(out: str) -> list[Figure]:
    n, clock = grab(r"of ([\d,]+) impressions .*clock: (nightly|the machine)", out)
    db, first, nxt, rerun = grab(
        r"^  (\w+)\s+history  1 day\(s\).*history rollup ([\d.]+) s; new day .*?rollup "
        r"([\d.]+) s .*nothing new ([\d.]+) s", out)
    (ratio,) = grab(r"next day / first day: ([\d.]+x)", out)
    rows = [(f"{db} next day / first day", ratio, "<= 1.5x",
             f"{first} s, {nxt} s; {n} a day, {clock.replace('the ', '')} clock"),
            (f"{db} re-run, nothing new", f"{rerun} s", "<= 1 s", f"{n} a day")]
    long = re.search(r"new day on (\d+)-day history / on 1-day history: ([\d.]+x)", out)
    if long:
        rows.append((f"{db} new day, {long[1]}-day / 1-day history", long[2], "<= 1.5x", ""))
    return rows


def nightly_figures(out: str) -> list[Figure]:
    db, nights, n = grab(r"\((\w+)\): (\d+) nights of ([\d,]+) ", out)
    ratio, last = grab(r"night \d+ / night 3 .*?: ([\d.]+x); mean of the last 3 .*?: "
                       r"([\d.]+x)", out)
    return [(f"{db} night {nights} / night 3, CPU", ratio, "<= 1.15x",
             f"last 3 / night 3 {last}; {n} a night")]


def segments_figures(out: str) -> list[Figure]:
    db, n, none, two, ratio, wall = grab(
        r"^(\w+), ([\d,]+) impressions, medians.*?no dimension ([\d.]+) CPU-s.*? ([\d.]+) "
        r"CPU-s \([\d.]+ s wall\): ([\d.]+x) CPU, ([\d.]+x) wall", out)
    return [(f"{db} two dimensions / none, CPU", ratio, "<= 1.3x",
             f"{none} -> {two} CPU-s, wall {wall}; {n}")]


def dashboard_figures(out: str) -> list[Figure]:
    (days,) = grab(r"experiment page, (\d+) days", out)
    rows = []
    for db, cold, worst, warm, renders in re.findall(
            r"^  (\w+)\s+experiment page: cold median ([\d.]+) s \(max ([\d.]+)\), warm "
            r"median ([\d.]+) s over (\d+)", out, re.MULTILINE):
        rows.append((f"{db} experiment page", f"cold {cold} s, warm {warm} s",
                     "< 2 s", f"{days} days, median of {renders}; max {worst} s"))
    if not rows:
        raise NoFigure("no render line")
    return rows


def slowloris_figures(out: str) -> list[Figure]:
    lines = re.findall(r"^\s*([\d.]+) s: (\d+) partial-header and (\d+) partial-body", out,
                       re.MULTILINE)
    if not lines:
        raise NoFigure("no count line")
    opened = int(lines[0][1]) + int(lines[0][2])
    closed = [t for t, h, b in lines if h == b == "0"]
    figure = (f"all {opened} closed by {closed[0]} s" if closed else
              f"{int(lines[-1][1]) + int(lines[-1][2])} of {opened} open at {lines[-1][0]} s")
    return [("slow clients, tracker serve", figure, "all closed", "read timeout 2 s")]


def calibration_figures(out: str) -> list[Figure]:
    n, low, high = grab(r"band around 5 % for ([\d,]+) experiments: \[([\d.]+ %), ([\d.]+ %)\]",
                        out)
    last, inside, always = grab(r"^\| user-level CTR \(MeanStats\) \| ([\d.]+ %) \((\w+) band\) "
                                r"\| [\d.]+ % \| ([\d.]+ %)", out)
    predicted, p_low, p_high = grab(r"predicted power ([\d.]+ %); 99 % band .*?\[([\d.]+ %), "
                                    r"([\d.]+ %)\]", out)
    (detected,) = grab(r"detected, fixed horizon at day \d+: ([\d.]+ %)", out)
    return [("A/A false positives, last day", last, f"[{low}, {high}]",
             f"{n} A/A; always-valid, any day {always} (<= 5 %)"),
            ("A/B +10% detected, last day", detected, f"[{p_low}, {p_high}]",
             f"predicted {predicted}")]


def accumulate_figures(out: str) -> list[Figure]:
    def rate(label: str) -> str:
        return grab(rf"^{re.escape(label)}.*?([\d.]+)\s+([\d.]+)\s+(\d+)$", out)[2]

    (shape,) = grab(r"^[\d,]+ rows x \d+ columns = (\d+M) values", out)
    return [("ExactSums, M values/s", rate("ExactSums"), "-",
             f"fsum {rate('math.fsum')}, numpy {rate('numpy')} (inexact); {shape}")]


def deltas_figures(out: str) -> list[Figure]:
    users, changed = grab(r"^([\d,]+) users seen, ([\d,]+) changed", out)
    today = sum(float(s) for s in re.findall(r"^today: .*?([\d.]+)$", out, re.MULTILINE)[:3])
    (deltas,) = grab(r"^deltas: exact, changed users only\s+([\d.]+)", out)
    return [("exact deltas, CPU s", deltas, "-",
             f"all users' pass {today:.3f}; {changed} of {users}")]


def heavy_user_figures(out: str) -> list[Figure]:
    lists, clicks, wall, peak = grab(r"^  with a user of ([\d,]+) lists, ([\d,]+) clicks\s+"
                                     r"([\d.]+) s wall.*?peak RSS\s+(\d+) MiB", out)
    plain_wall, plain_peak = grab(r"^  without it\s+([\d.]+) s wall.*?peak RSS\s+(\d+) MiB", out)
    return [("a day with one heavy user", f"{wall} s, {peak} MiB", "bounded memory",
             f"{lists} x {clicks}; without {plain_wall} s, {plain_peak} MiB")]


def erasure_figures(out: str) -> list[Figure]:
    (db,) = grab(r"^(\w+): \d+ impressions", out)
    times = dict(re.findall(r"^  (.+?)\s+([\d.]+) s$", out, re.MULTILINE))
    try:
        after, full = times["rollup after the erasure"], times["rollup --full (for comparison)"]
        delete = times["delete_user"]
    except KeyError as missing:
        raise NoFigure(f"no {missing} line") from None
    return [(f"{db} rollup after an erasure", f"{after} s", "< --full",
             f"--full {full} s; delete_user {delete} s")]


def cuped_rollup_figures(out: str) -> list[Figure]:
    db, first, new = grab(r"^  (\w+)\s+=> with / without CUPED: first day ([\d.]+x), new day "
                          r"([\d.]+x)", out)
    return [(f"{db} rollup, CUPED / none", f"first {first}, new day {new}", "-", "")]


def spark_figures(out: str) -> list[Figure]:
    (ratio,) = grab(r"^spark local\[2\]: .*; ([\d.]+x) the kernel's CPU", out)
    kernel, spark = grab(r"^kernel alone: [\d.]+ CPU-s \(([\d.]+) per 1M\)(?:.|\n)*?"
                         r"^spark local\[2\]: [\d.]+ CPU-s \(([\d.]+) per 1M\)", out)
    (n,) = grab(r"^generated ([\d,]+) impressions", out) if "generated" in out else ("?",)
    return [("Spark CPU / the kernel's", ratio, "<= 3x",
             f"CPU-s per 1M: {spark}, kernel {kernel}; {n}")]


def collector_figures(out: str) -> list[Figure]:
    (rate,) = grab(r"^  ([\d,]+) impressions/s", out)
    (head,) = grab(r"^collector, (.*?),? PostgreSQL", out)
    (p99,) = grab(r"p99 (\d+)", out)
    return [("POST /v1/impressions", f"{rate}/s", ">= 20,000/s",
             f"{head}; batch p99 {p99} ms")]


# ------------------------------------------------------------------ the curated set

@dataclass(frozen=True)
class Bench:
    """A script of this folder, its arguments at ``--quick`` and at the documented full size
    (``{db}``: ``--db``'s value), and how its figures are read."""

    name: str
    quick: str
    full: str  # "": the script's defaults
    figures: Callable[[str], list[Figure]]
    in_quick: bool = True  # in ``--quick``'s default set
    needs: str | None = None  # the only database it runs on

    def command(self, quick: bool, db: str) -> list[str]:
        args = (self.quick if quick else self.full).format(db=db)
        return [sys.executable, f"benchmarks/{self.name}.py", *shlex.split(args)]


BENCHES = [
    Bench("metrics", "--n 100000 --ranx-n 50000 --repeat 3", "", metrics_figures),
    Bench("ingest", "--db {db} --impressions 20000 --repeat 1 --calls 200", "--db {db}",
          ingest_figures),
    Bench("rollup", "--db {db} --impressions 100000 --users 50000 --no-history --nightly",
          "--db {db}", rollup_figures),
    Bench("nightly", "--db {db} --nights 6 --impressions 20000 --users 20000 --history-days 2",
          "--db {db} --users 1000000 --active 20", nightly_figures),
    Bench("segments", "--db {db} --impressions 50000 --users 15000 --runs 1",
          "--db {db} --impressions 1000000 --runs 5", segments_figures),
    Bench("heavy_user", "--lists 10000 --clicks 2000", "", heavy_user_figures),
    Bench("erasure", "--db {db} --impressions 20000", "--db {db} --impressions 100000",
          erasure_figures),
    Bench("dashboard", "--db {db} --days 30 --repeat 3", "--db {db}", dashboard_figures),
    Bench("slowloris", "--connections 100 --read-timeout 2 --watch 4",
          "--connections 300 --read-timeout 2 --watch 6", slowloris_figures),
    Bench("calibration", "--experiments 400 --users 5000 --srm-replicates 5000 --srm-users "
          "20000 --small-reps 50 --decision-reps 10 --trend-reps 20", "", calibration_figures),
    Bench("accumulate", "--rows 50000 --runs 3", "", accumulate_figures),
    Bench("deltas", "--users 200000 --changed 12500 --runs 3", "", deltas_figures),
    Bench("collector", "--impressions 60000 --workers 2 --senders 4", "", collector_figures,
          needs="postgresql"),
    Bench("cuped_rollup", "--db {db} --impressions 20000 --users 20000",
          "--db {db} --impressions 200000", cuped_rollup_figures, in_quick=False),
    Bench("spark", "--impressions 200000 --no-default",
          "--impressions 10000000 --no-default --bucketed", spark_figures, in_quick=False),
]
# Not run here: first_day.py and next_day.py keep generated rows between runs (--generate
# once, then timed runs); cuped.py; state.py, whose encode figure now times the encoding
# UnitTotals keeps. calibration's later sections run with few replicates, unread.
BY_NAME = {bench.name: bench for bench in BENCHES}


@dataclass
class Outcome:
    """One script's run: its exit code (None: stopped at the timeout), output, seconds."""

    bench: Bench
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float


def run(bench: Bench, quick: bool, db: str, env: dict[str, str]) -> Outcome:
    began = time.perf_counter()
    try:
        done = subprocess.run(bench.command(quick, db), cwd=ROOT, env=env, text=True,
                              capture_output=True, timeout=QUICK_TIMEOUT if quick else None)
    except subprocess.TimeoutExpired as stopped:
        def text(part: str | bytes | None) -> str:
            return part.decode(errors="replace") if isinstance(part, bytes) else part or ""

        return Outcome(bench, None, text(stopped.stdout), text(stopped.stderr),
                       time.perf_counter() - began)
    return Outcome(bench, done.returncode, done.stdout, done.stderr,
                   time.perf_counter() - began)


def rows_of(outcome: Outcome) -> list[tuple[str, str, str, str, str]]:
    """The table's rows of one run: its figures, or one row saying why there are none."""
    name = outcome.bench.name
    if outcome.returncode is None:
        return [(name, "-", f"timed out after {outcome.seconds:.0f} s", "-",
                 last_line(outcome.stdout))]
    if outcome.returncode != 0:
        return [(name, "-", f"FAILED (exit {outcome.returncode})", "-",
                 last_line(outcome.stderr) or last_line(outcome.stdout))]
    try:
        return [(name, *figure) for figure in outcome.bench.figures(outcome.stdout)]
    except NoFigure as missing:
        return [(name, "-", "no figure", "-", str(missing))]


def last_line(text: str, width: int = 90) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:width] if lines else ""


def render(rows: list[tuple[str, ...]]) -> str:
    """A plain-text table, columns as wide as their widest cell."""
    header = ("benchmark", "what", "figure", "target", "note")
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def tree() -> str:
    """The commit measured, and whether the working tree differs from it."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown commit"
    return commit + (" + uncommitted changes" if git("status", "--porcelain",
                                                     "--untracked-files=no") else "")


def chosen(only: str | None, db: str) -> list[Bench]:
    if only:
        unknown = set(only.split(",")) - set(BY_NAME)
        if unknown:
            raise SystemExit(f"unknown benchmark(s): {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(BY_NAME)}")
        picked = [BY_NAME[name] for name in only.split(",")]
    else:
        picked = [b for b in BENCHES if b.in_quick]
    return [b for b in picked if b.needs in (None, db)]


def commands(db: str) -> str:
    lines = ["The documented full sizes (hours in all; --full runs them, --quick small ones):"]
    for bench in BENCHES:
        line = f"  .venv/bin/python benchmarks/{bench.name}.py {bench.full.format(db=db)}"
        lines.append(line.rstrip() + (f"   # {bench.needs} only" if bench.needs else ""))
    lines.append("  and the two-step ones, first_day.py and next_day.py: see benchmarks/README.md")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes, a few minutes")
    size.add_argument("--full", action="store_true", help="the documented sizes (hours)")
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--only", metavar="NAMES", help=f"comma-separated, of: "
                        f"{', '.join(BY_NAME)}")
    parser.add_argument("--pg-url", help="PostgreSQL server for --db postgresql "
                        "(default: $TRACKER_BENCH_PG_URL or the scripts' own)")
    args = parser.parse_args(argv)
    if not (args.quick or args.full):
        print(commands(args.db))
        return
    benches = chosen(args.only, args.db)
    started, rows, spent = time.perf_counter(), [], []
    with tempfile.TemporaryDirectory(prefix="tracker-bench-run-") as folder:
        env = {**os.environ, "TMPDIR": folder, "PYTHONWARNINGS": "ignore"}
        # this tree's tracker, whichever checkout the virtualenv's editable install names
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        if args.pg_url:
            env["TRACKER_BENCH_PG_URL"] = args.pg_url
        for i, bench in enumerate(benches, 1):
            print(f"[{i}/{len(benches)}] {bench.name} ...", end=" ", file=sys.stderr, flush=True)
            outcome = run(bench, args.quick, args.db, env)
            print(f"{outcome.seconds:.0f} s", file=sys.stderr, flush=True)
            rows += rows_of(outcome)
            spent.append(f"{bench.name} {outcome.seconds:.0f}")
    print(render(rows))
    print(f"\n{'--quick' if args.quick else '--full'}, --db {args.db}; tree {tree()}; "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs; "
          f"{time.perf_counter() - started:.0f} s in all:\n{', '.join(spent)}")


if __name__ == "__main__":
    main()
