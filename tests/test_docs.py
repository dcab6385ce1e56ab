"""The documentation site builds, and what it generates from the code says what the code does.

The pages' runnable examples are run by ``tests/test_readme.py``; here: the strict build (a
broken link, anchor or reference fails it), the build hook's generated pages
(``docs/_generate.py``) and the docstring rewriting of the API reference
(``docs/_docstrings.py``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracker.config import Settings
from tracker.metrics import catalog

ROOT = Path(__file__).resolve().parents[1]


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_{name}", ROOT / "docs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _module("_generate")
docstrings = _module("_docstrings")


def test_the_site_builds_strictly_with_every_page_in_its_navigation(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs").rglob("*.md")):
        name = page.relative_to(ROOT / "docs").as_posix()
        assert f": {name}" in nav, f"docs/{name} is not in mkdocs.yml's nav"
        assert (site / name.removesuffix(".md").removesuffix("index")).is_dir()
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "tracker experiments create" in cli and "--max-levels" in cli
    assert "Sentinel" not in cli
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "log_impressions" in api and "TrackerClient" in api


def test_the_configuration_page_lists_every_setting_with_its_default():
    table = generate.settings_table()
    for field in dataclasses.fields(Settings):
        var = field.metadata["var"]
        row = next(line for line in table.splitlines() if f"`{var.env}`" in line)
        shown = "unset" if field.default is None else f"`{field.default}`"
        assert shown in row, row
    assert "TRACKER_DATABASE_URL" in table and "sqlite:///tracker.db" in table


def test_the_metrics_page_lists_every_metric_of_the_catalogue_in_its_group():
    text = generate.metrics_tables()
    for group in catalog.GROUPS:
        section = text.split(f"## {group.label}\n")[1].split("\n## ")[0]
        for name in catalog.in_group(group):
            m = catalog.info(name)
            heading = f"### `{name}@k`" if m.takes_k else f"### `{name}`"
            entry = section.split(heading + "\n")[1].split("\n### ")[0]
            assert m.formula in entry and m.reference in entry and m.range_text in entry
    assert len(re.findall(r"^### `", text, re.MULTILINE)) == len(catalog.CATALOG)


def test_an_unknown_generated_marker_fails_the_build():
    class Page:
        class file:
            src_path = "x.md"

    assert generate.on_page_markdown("a\n<!-- generated: settings -->\n", Page, None, None) \
        .startswith("a\n| variable |")
    with pytest.raises(ValueError, match="no generator named 'nothing'"):
        generate.on_page_markdown("<!-- generated: nothing -->", Page, None, None)


def test_doctests_are_fenced_and_roles_shown_as_code():
    text = ("Split users, see :func:`~tracker.stats.srm_test` and :class:`tracker.Tracker`::\n"
            "\n"
            "    counts = srm(users)\n"
            "\n"
            ">>> slice_srm({'ios': 1})\n"
            "[('ios', False), ('web', True)]\n"
            "\n"
            "After.")
    assert docstrings.markdown(text).split("\n") == [
        "Split users, see `srm_test` and `tracker.Tracker`:",
        "",
        "    counts = srm(users)",
        "",
        "```pycon",
        ">>> slice_srm({'ios': 1})",
        "[('ios', False), ('web', True)]",
        "```",
        "",
        "After.",
    ]


def _synopsis() -> list[str]:
    """The entries of the CLI page's synopsis: each ``tracker ...`` line with its
    continuation lines joined."""
    text = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    block = text.split("## Synopsis", 1)[1].split("```", 2)[1]
    entries: list[str] = []
    for line in block.splitlines():
        if line.startswith("tracker"):
            entries.append(line)
        elif line.strip() and entries:
            entries[-1] += " " + line.strip()
    return entries


def _leaves(group, path=("tracker",)):
    import click

    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _leaves(command, (*path, name))
        elif not command.hidden:
            yield (*path, name), command


def test_the_cli_synopsis_names_every_command_and_only_options_they_have():
    """The synopsis is written by hand (the reference below it is generated): each of its
    options belongs to a command of its entry, and every command has an entry."""
    import click

    from tracker.cli import main

    leaves = dict(_leaves(main))
    named = set()
    for entry in _synopsis():
        words = entry.split()
        group, path, commands = main, ["tracker"], []
        for word in words[1:]:   # the group path, then alternatives "a | b | c"
            name = word.strip("|")
            if isinstance(group, click.Group) and name in group.commands:
                sub = group.commands[name]
                if isinstance(sub, click.Group):
                    group, path = sub, [*path, name]
                else:
                    commands.append((*path, name))
        commands = commands or [tuple(path)]
        named.update(commands)
        options = {o for c in commands for p in leaves.get(c, main).params
                   if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)}
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", entry):
            assert option in options, f"synopsis: {entry[:60]}...: no {option}"
    missing = sorted(" ".join(path) for path in leaves if path not in named)
    assert not missing, f"commands missing from the CLI synopsis: {missing}"
