"""The layers of ../shared/DESIGN.md, enforced: each package imports only what it may."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

# package folder -> top-level third-party modules and tracker modules it may import
ALLOWED = {
    "tracker/metrics": ({"numpy"}, {"tracker.metrics"}),
    "tracker/stats": ({"numpy", "scipy"}, {"tracker.stats"}),
    # arrow.py: the big reads as Arrow tables (ADBC on PostgreSQL)
    # computed.py: the computed tables as DataFrames (the read API of the report and dashboard)
    # tracker.install: where migrations/ is, and the postgres extra's check
    "tracker/store": ({"sqlalchemy", "alembic", "pyarrow", "pandas", "adbc_driver_manager",
                       "adbc_driver_postgresql"},
                      {"tracker.store", "tracker.config", "tracker.errors", "tracker.install"}),
    # installation facts (distribution, extras, shipped folders): a leaf any layer may ask
    "tracker/install.py": (set(), {"tracker.errors"}),
    # metric roles on an experiment are checked against the registry's metric names
    "tracker/ingest": ({"numpy", "pandas", "pyarrow", "sqlalchemy"},
                       {"tracker.ingest", "tracker.store", "tracker.config", "tracker.errors",
                        "tracker.metrics.registry"}),
    # the rollup reads a day's lists as Arrow tables and stores unit totals as JSON + bytes;
    # filelock: one rollup at a time on SQLite
    "tracker/rollup": ({"numpy", "pandas", "pyarrow", "orjson", "sqlalchemy", "threadpoolctl",
                        "filelock"},
                       {"tracker.rollup", "tracker.store", "tracker.metrics", "tracker.config",
                        "tracker.errors",
                        # the run's last step publishes each experiment's summary and alerts
                        # (engine._publish: one call, imported inside it)
                        "tracker.publish"}),
    # the demo: a pure simulation, loaded through a Tracker passed in (duck typed)
    "tracker/demo": ({"numpy"}, {"tracker.demo", "tracker.errors"}),
    "tracker/collector": ({"fastapi", "starlette", "pydantic", "uvicorn", "orjson", "sqlalchemy",
                           "prometheus_client"},
                          {"tracker.collector", "tracker.ingest", "tracker.store", "tracker.config",
                           "tracker.errors", "tracker.install"}),
    "tracker/demo/simulation.py": ({"numpy"}, {"tracker.demo"}),
    # the dashboard reads computed tables and statistics, never raw logs or the ingest path
    "dashboard": ({"streamlit", "pandas", "altair"},
                  {"dashboard", "tracker.store", "tracker.stats", "tracker.report",
                   "tracker.metrics", "tracker.config", "tracker.errors", "tracker.durations"}),
    # pyarrow (a core dependency): 0019 turns stored Arrow streams into rows and back, so
    # that days past a retention horizon, which cannot be recomputed, keep their values
    "migrations/versions": ({"alembic", "sqlalchemy", "pyarrow"}, set()),
    # the lake layout and the export into it: pyarrow from the store's Arrow reader, no Spark
    "tracker/lake": ({"numpy", "pyarrow", "sqlalchemy"},
                     {"tracker.lake", "tracker.store", "tracker.errors"}),
    # the scale-out: the only package that imports pyspark (the spark extra); it scores with
    # the default engine's chunk scorer and writes the rows the report reads with its code
    "tracker/spark": ({"pyspark", "pyarrow", "numpy", "pandas"},
                      {"tracker.spark", "tracker.lake", "tracker.metrics", "tracker.errors",
                       "tracker.install", "tracker.rollup", "tracker.store",
                       "tracker.config"}),
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def _cases():
    for folder, (third_party, own) in ALLOWED.items():
        target = ROOT / folder
        paths = [target] if target.is_file() else sorted(target.rglob("*.py"))
        for path in paths:
            yield pytest.param(path, third_party, own, id=str(path.relative_to(ROOT)))


@pytest.mark.parametrize(("path", "third_party", "own"), list(_cases()))
def test_module_imports_only_what_its_layer_may(path: Path, third_party: set, own: set):
    wrong = []
    for name in _imports(path):
        top = name.split(".")[0]
        if top in STDLIB or top in third_party:
            continue
        if top in ("tracker", "dashboard") and any(name == o or name.startswith(o + ".")
                                                  for o in own):
            continue
        wrong.append(name)
    assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}, outside its layer"


@pytest.mark.parametrize("path", sorted((ROOT / "dashboard").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_dashboard_imports_no_rollup_module(path: Path):
    """The dashboard reads computed tables through the store (tracker.store.computed), never
    the rollup's code, whichever module of it: at module level or inside a function."""
    rollup = [name for name in _imports(path)
              if name == "tracker.rollup" or name.startswith("tracker.rollup.")]
    tree = ast.parse(path.read_text())
    rollup += [f"tracker.{alias.name}" for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module == "tracker"
               for alias in node.names if alias.name == "rollup"]
    assert not rollup, f"{path.relative_to(ROOT)} imports {rollup}"


def _module_level_imports(path: Path, package: str) -> set[str]:
    """The modules of ``package`` that ``path`` imports when it is imported (statements at the
    top of the module, not inside functions): the edges an import cycle is made of."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith(package + ".")}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (module -> modules it imports), or []."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str]:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return []
        for imported in sorted(graph.get(module, ())):
            cycle = visit(imported, path + [module])
            if cycle:
                return cycle
        done.add(module)
        return []

    for module in sorted(graph):
        cycle = visit(module, [])
        if cycle:
            return cycle
    return []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_the_store_has_no_import_cycle():
    """Each table module imports ``tracker.store.base``; none imports another back at import
    time (models.py used to import keys and rollup_tables mid-file, which imported it)."""
    folder = ROOT / "tracker" / "store"
    graph = {f"tracker.store.{path.stem}": _module_level_imports(path, "tracker.store")
             for path in folder.glob("*.py") if path.stem != "__init__"}
    assert _cycle(graph) == []


@pytest.mark.parametrize("path", [path for folder in ("tracker", "dashboard")
                                  for path in sorted((ROOT / folder).rglob("*.py"))
                                  if "spark" not in path.relative_to(ROOT).parts],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_only_tracker_spark_imports_pyspark(path: Path):
    """The spark extra is optional: outside tracker/spark nothing imports pyspark, at module
    level or inside a function."""
    spark = [name for name in _imports(path) if name.split(".")[0] in ("pyspark", "py4j")]
    assert not spark, f"{path.relative_to(ROOT)} imports {spark}"


def test_the_contract_covers_the_code():
    covered = sum(1 for _ in _cases())
    assert covered >= 10
