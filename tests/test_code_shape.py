"""The shape STYLE.md asks of tracker/ and dashboard/: no module over 600 lines, no function
over 60 (counted from its ``def`` line to its last line, docstring included, decorators not).

Checked on the source with ``ast``, so a file that fails to parse fails here too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tracker", "dashboard")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60

def function_lengths(source: str) -> dict[str, int]:
    """Lines of every function and method in ``source``, by qualified name
    (``Class.method``, ``outer.inner``): its ``def`` line to its last line."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    assert child.end_lineno is not None
                    lengths[name] = child.end_lineno - child.lineno + 1
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return lengths


def modules() -> dict[str, str]:
    """Every Python module of the packages: path relative to the repository -> source."""
    return {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
            for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def long_modules() -> dict[str, int]:
    lines = {path: len(source.splitlines()) for path, source in modules().items()}
    return {path: n for path, n in lines.items() if n > MAX_MODULE_LINES}


def long_functions() -> dict[tuple[str, str], int]:
    return {(path, name): n for path, source in modules().items()
            for name, n in function_lengths(source).items() if n > MAX_FUNCTION_LINES}


def test_function_lengths_count_from_def_to_the_last_line():
    source = (
        "@decorator\n"
        "def outer(x):\n"
        '    """Docstring."""\n'
        "    def inner():\n"
        "        return x\n"
        "    return inner\n"
        "\n"
        "class Thing:\n"
        "    async def method(self):\n"
        "        pass\n"
    )
    assert function_lengths(source) == {"outer": 5, "outer.inner": 2, "Thing.method": 2}


def test_the_packages_are_found():
    found = modules()
    assert "tracker/metrics/batch/judging.py" in found and "dashboard/app.py" in found


def test_no_module_is_over_600_lines():
    over = long_modules()
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them by concern): {over}"


def test_no_function_is_over_60_lines():
    over = long_functions()
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines: {over}"
