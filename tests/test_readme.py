"""The README and the docs work as written.

Every fenced shell or Python block that the README or a page under ``docs/`` marks
``<!-- runnable -->`` (an HTML comment on the line before, invisible on GitHub and in the built
site) runs as written: the blocks of one section (``## ...``, or the page's ``# ...`` title
before its first ``##``) in order, in a new folder holding what a clone holds (``.venv``,
``examples/``), on a new SQLite database. Each must exit 0 and print every
``<!-- output has: TEXT -->`` line given between the marker and the block. A section of the
same name in several files is one section (the README's quick start and the docs' page run in
one folder), and a block identical to one already run there is checked against that run's
output instead of running twice. The blocks that are not run (servers, PostgreSQL, Kafka,
systemd) still name only ``tracker`` commands and options that exist.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCUMENTS = (README, *sorted((ROOT / "docs").rglob("*.md")))
RUNNABLE = "<!-- runnable -->"
EXPECT = re.compile(r"<!-- output has: (.+?) -->$")
FENCE = re.compile(r"^```([\w-]*)\s*$")
RUNNABLE_LANGUAGES = {"bash": "shell", "sh": "shell", "python": "python"}
# Sections whose blocks a new user follows first: each must keep runnable blocks.
MUST_RUN = ("Quick start", "Logging from Python", "Backups")
BLOCK_TIMEOUT = 900  # seconds; the demo takes about a minute on a busy machine


@dataclass(frozen=True)
class Block:
    source: str        # the file, relative to the repository's root
    section: str
    line: int          # 1-based line of the opening fence
    language: str
    code: str
    runnable: bool
    expected: tuple[str, ...] = ()

    def where(self) -> str:
        return f"{self.source} line {self.line} ({self.section})"


def read_blocks(text: str, source: str = "README.md") -> list[Block]:
    """The fenced blocks of one Markdown file with their section, language and markers."""
    blocks: list[Block] = []
    lines = text.splitlines()
    section, runnable, expected = "", False, []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("# ", "## ")):
            section = line.lstrip("#").strip()
        elif line.strip() == RUNNABLE:
            runnable, expected = True, []
        elif runnable and EXPECT.match(line.strip()):
            expected.append(EXPECT.match(line.strip()).group(1))
        elif (opening := FENCE.match(line)) is not None:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            blocks.append(Block(source, section, i + 1, opening.group(1),
                                "\n".join(lines[i + 1:end]), runnable, tuple(expected)))
            runnable, expected, i = False, [], end
        elif runnable and line.strip():
            raise AssertionError(f"{source} line {i + 1}: {RUNNABLE} must be followed by "
                                 f"'<!-- output has: ... -->' lines and a fenced block")
        i += 1
    return blocks


BLOCKS = [block for path in DOCUMENTS
          for block in read_blocks(path.read_text(encoding="utf-8"),
                                   path.relative_to(ROOT).as_posix())]
SECTIONS = list(dict.fromkeys(b.section for b in BLOCKS if b.runnable))


def section_id(section: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", section.lower()).strip("-")


# ---------------------------------------------------------------------------- running


def new_clone(folder: Path) -> dict[str, str]:
    """``folder`` made to look like the README's working folder (a clone with its ``.venv``)
    and the environment its commands run in: this checkout's code, a new SQLite database."""
    (folder / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    shutil.copytree(ROOT / "examples", folder / "examples")
    env = {name: value for name, value in os.environ.items() if not name.startswith("TRACKER_")}
    env["TRACKER_DATABASE_URL"] = f"sqlite:///{folder / 'tracker.db'}"
    env["PATH"] = os.pathsep.join([str(Path(sys.prefix) / "bin"), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_block(block: Block, folder: Path, env: dict[str, str], *, again: bool = False) -> str:
    """Run ``block`` in ``folder``; its output, after checking its exit status and (unless
    run ``again``: what a block prints is what it prints the first time) its output."""
    if RUNNABLE_LANGUAGES[block.language] == "shell":
        command = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    else:
        command = [sys.executable, "-c", block.code]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT)
    output = done.stdout + done.stderr
    assert done.returncode == 0, (
        f"{block.where()} exited with {done.returncode}:\n{block.code}\n--- output\n{output}")
    if not again:
        check_output(block, output)
    return output


def check_output(block: Block, output: str) -> None:
    for text in block.expected:
        assert text in output, (f"{block.where()} printed no {text!r}:\n{block.code}\n"
                                f"--- output\n{output}")


@pytest.mark.parametrize("section", SECTIONS, ids=[section_id(s) for s in SECTIONS])
def test_each_section_runs_as_written_in_a_new_folder(section, tmp_path):
    env = new_clone(tmp_path)
    outputs: dict[str, str] = {}   # code -> what it printed: the same block runs once
    for block in BLOCKS:
        if block.runnable and block.section == section:
            if block.code in outputs:
                check_output(block, outputs[block.code])
            else:
                outputs[block.code] = run_block(block, tmp_path, env)


def test_logging_from_python_runs_again_without_errors(tmp_path):
    """A script a user reruns (a deploy, a notebook cell) stores nothing twice and fails
    nowhere: the experiment comes back (exist_ok) and the events are duplicates."""
    env = new_clone(tmp_path)
    blocks = [b for b in BLOCKS if b.runnable and b.section == "Logging from Python"]
    first = [run_block(b, tmp_path, env) for b in blocks]
    again = [run_block(b, tmp_path, env, again=True) for b in blocks]
    snippet = next(i for i, b in enumerate(blocks) if "log_impressions" in b.code)
    assert "3 0 [] []" in first[snippet]   # stored, duplicates, conflicts, rejected
    assert "0 3 [] []" in again[snippet]


def test_the_sections_a_new_user_follows_keep_runnable_blocks():
    for section in MUST_RUN:
        found = [b for b in BLOCKS if b.runnable and b.section.startswith(section)]
        assert found, f"README section {section!r} has no block marked {RUNNABLE}"
    for block in BLOCKS:
        if block.runnable:
            assert block.language in RUNNABLE_LANGUAGES, (
                f"{block.where()}: only {', '.join(RUNNABLE_LANGUAGES)} blocks can run")


def test_the_import_example_maps_every_event_type_of_the_example_files():
    block = next(b for b in BLOCKS if "examples/interactions.jsonl" in b.code and b.runnable)
    mapped = set(re.findall(r"--relevance (\w+)=", block.code))
    lines = (ROOT / "examples" / "interactions.jsonl").read_text(encoding="utf-8").splitlines()
    present = {json.loads(line)["event"] for line in lines if line.strip()}
    assert present <= mapped, f"{block.where()} does not map {sorted(present - mapped)}"


# ---------------------------------------------------------------------------- commands shown

SHELL_OPERATORS = {"&&", "||", ";", "|", "&", ">", ">>", "2>&1", "<", "then", "do"}
COMMAND_POSITION = SHELL_OPERATORS | {"exec", "sudo", "nice", "env", "time"}


def _command_tree():
    from tracker.cli import main
    return main


def _is_tracker(token: str) -> bool:
    return token.rsplit("=", 1)[-1].rsplit("/", 1)[-1] == "tracker"


def check_invocations(tokens: list[str], where: str) -> int:
    """Check every ``tracker ...`` invocation among shell ``tokens``: its subcommands exist
    and each ``--option`` belongs to the command it is given to. Returns how many it saw."""
    main = _command_tree()
    seen = 0
    for i, token in enumerate(tokens):
        if not _is_tracker(token) or i + 1 >= len(tokens):
            continue
        command, path, rest = main, ["tracker"], tokens[i + 1:]
        first = rest[0]
        in_position = (i == 0 or tokens[i - 1] in COMMAND_POSITION
                       or re.match(r"^Exec[A-Za-z]*=", token) is not None    # systemd ExecStart=
                       or re.match(r"^[A-Z_][A-Z0-9_]*=", tokens[i - 1]) is not None)
        if not (in_position or command.get_command(click.Context(main), first)):
            continue  # a folder or database called tracker, not the command
        seen += 1
        ctx = click.Context(main)
        for word in rest:
            if word in SHELL_OPERATORS or word.startswith("#"):
                break
            if isinstance(command, click.Group) and not word.startswith("-"):
                sub = command.get_command(ctx, word)
                assert sub is not None, (f"{where}: `{' '.join(path)} {word}` is not a "
                                         f"command (see {' '.join(path)} --help)")
                command, path = sub, [*path, word]
                continue
            if word.startswith("-") and word != "-":
                name = word.split("=", 1)[0]
                known = {o for p in command.params if isinstance(p, click.Option)
                         for o in (*p.opts, *p.secondary_opts)} | {"-h", "--help"}
                assert name in known, (f"{where}: `{' '.join(path)}` has no option {name} "
                                       f"(it has {', '.join(sorted(known))})")
    return seen


def shell_lines(code: str) -> list[str]:
    """The block's command lines: continuation lines joined, each ``$(...)`` one word."""
    return re.sub(r"\$\([^()]*\)", "SUBSTITUTED", code.replace("\\\n", " ")).splitlines()


def python_commands(code: str) -> list[list[str]]:
    """Command lines inside a Python block: strings (e.g. an Airflow ``bash_command``) and
    lists of strings (``subprocess.run([...])``) that start with the ``tracker`` command and
    one of its commands; a message that starts with the word tracker is not one."""
    main = _command_tree()
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            tokens = shlex.split(node.value, comments=True)
        elif isinstance(node, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            tokens = [e.value for e in node.elts]
        else:
            continue
        if len(tokens) > 1 and _is_tracker(tokens[0]) \
                and main.get_command(click.Context(main), tokens[1]) is not None:
            found.append(tokens)
    return found


def test_every_tracker_command_the_readme_shows_exists_with_its_options():
    seen = 0
    for block in BLOCKS:
        if block.language in ("bash", "sh", "ini", "crontab"):
            for number, line in enumerate(shell_lines(block.code)):
                tokens = shlex.split(line, comments=True) if block.language != "ini" else \
                    line.split()
                seen += check_invocations(tokens, f"{block.where()}, line {number + 1}")
        elif block.language == "python":
            for tokens in python_commands(block.code):
                seen += check_invocations(tokens, block.where())
    assert seen >= 15, "the README's tracker commands were not found: is the parser stale?"


def test_python_blocks_compile_and_import_only_what_tracker_has():
    import importlib

    for block in BLOCKS:
        if block.language != "python":
            continue
        tree = compile(block.code, block.where(), "exec", flags=ast.PyCF_ONLY_AST)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tracker"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), (
                        f"{block.where()}: {node.module} has no {alias.name}")


def test_a_wrong_command_or_option_is_caught():
    """The checker itself: it must reject what does not exist."""
    with pytest.raises(AssertionError, match="is not a command"):
        check_invocations(shlex.split("tracker rolup"), "here")
    with pytest.raises(AssertionError, match="has no option --nightly"):
        check_invocations(shlex.split("cd /srv && .venv/bin/tracker rollup --nightly"), "here")
    with pytest.raises(AssertionError, match="has no option --yes"):
        check_invocations(["ExecStart=/srv/tracker/.venv/bin/tracker", "demo", "--yes"], "here")
    assert check_invocations(shlex.split("createdb tracker && cd /srv/tracker"), "here") == 0
    assert check_invocations(shlex.split("createdb --owner=tracker tracker_2"), "here") == 0
    assert check_invocations(python_commands('op(bash_command="tracker rollup")')[0],
                             "here") == 1
    assert python_commands('print("tracker collector not answering")') == []
