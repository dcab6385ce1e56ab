"""Contract: tracker.stats is pure (numpy, scipy and the standard library only)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import tracker.stats

ALLOWED_THIRD_PARTY = {"numpy", "scipy"}
STATS_DIR = Path(tracker.stats.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_stats_imports_only_numpy_scipy_and_the_standard_library() -> None:
    offenders = {}
    for path in sorted(STATS_DIR.rglob("*.py")):
        bad = {
            name for name in _imports(path)
            if name.split(".")[0] not in ALLOWED_THIRD_PARTY | set(sys.stdlib_module_names)
            and not (name == "tracker.stats" or name.startswith("tracker.stats."))
        }
        if bad:
            offenders[path.name] = sorted(bad)
    assert offenders == {}
    assert len(list(STATS_DIR.glob("*.py"))) > 5  # the walk did see the package
