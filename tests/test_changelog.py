"""CHANGELOG.md keeps the Keep a Changelog 1.1.0 format and agrees with the package's version.

The newest released section names ``tracker.__version__``, which ``tracker --version`` prints.
No database is opened.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

import tracker
from tracker.cli import main

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"
TYPES = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
RELEASE = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$")


def text() -> str:
    return CHANGELOG.read_text(encoding="utf-8")


def sections() -> list[tuple[str, list[str]]]:
    """Each ``## `` heading with the lines below it, up to the next ``## `` heading."""
    found: list[tuple[str, list[str]]] = []
    for line in text().splitlines():
        if line.startswith("## "):
            found.append((line, []))
        elif found:
            found[-1][1].append(line)
    return found


def releases() -> list[tuple[int, int, int]]:
    """The released versions, in the order the file lists them."""
    matches = [RELEASE.match(heading) for heading, _ in sections()]
    return [tuple(int(part) for part in match.groups()[:3]) for match in matches if match]


def change_types(body: list[str]) -> dict[str, int]:
    """Per ``### Type`` subsection of a section: how many ``- `` entries it holds."""
    counts: dict[str, int] = {}
    current = None
    for line in body:
        if line.startswith("### "):
            current = line[4:].strip()
            counts[current] = 0
        elif current is not None and line.startswith("- ") and line[2:].strip():
            counts[current] += 1
    return counts


def test_title_and_format_statement():
    lines = text().splitlines()
    assert lines[0] == "# Changelog"
    assert "[Keep a Changelog](https://keepachangelog.com/en/1.1.0/)" in text()
    assert "[Semantic Versioning](https://semver.org/spec/v2.0.0.html)" in text()


def test_unreleased_comes_first():
    headings = [heading for heading, _ in sections()]
    assert headings and headings[0] == "## [Unreleased]"
    assert headings.count("## [Unreleased]") == 1


def test_every_release_heading_has_a_version_and_a_date():
    for heading, _ in sections():
        if heading != "## [Unreleased]":
            match = RELEASE.match(heading)
            assert match, f"not '## [X.Y.Z] - YYYY-MM-DD': {heading!r}"
            date.fromisoformat(match.group(4))  # a real calendar day


def test_versions_descend():
    versions = releases()
    assert versions, "no released version"
    assert versions == sorted(versions, reverse=True)
    assert len(set(versions)) == len(versions)


@pytest.mark.parametrize("heading", [heading for heading, _ in sections()])
def test_each_section_has_typed_entries(heading):
    counts = change_types(dict(sections())[heading])
    if heading != "## [Unreleased]":  # Unreleased may be empty right after a release
        assert counts, f"{heading} has no ### subsection"
    for kind, entries in counts.items():
        assert kind in TYPES, f"{heading}: unknown subsection ### {kind}"
        assert entries > 0, f"{heading}: ### {kind} has no entry"


def test_newest_release_is_the_package_version():
    newest = ".".join(str(part) for part in releases()[0])
    assert newest == tracker.__version__


def test_version_option_prints_the_package_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith(tracker.__version__)
    assert f"## [{tracker.__version__}] - " in text()
