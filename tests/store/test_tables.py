"""One module registers every table: what Alembic and the schema test compare is complete."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "tracker" / "store"


def _declared_tables() -> dict[str, str]:
    """table name -> module, for every class under tracker/store that sets ``__tablename__``
    or ``__table__ = sa.Table("name", ...)``."""
    found = {}
    for path in sorted(STORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            for statement in node.body:
                target = (statement.target if isinstance(statement, ast.AnnAssign) else
                          statement.targets[0] if isinstance(statement, ast.Assign) else None)
                if (isinstance(target, ast.Name) and target.id == "__tablename__"
                        and isinstance(statement.value, ast.Constant)):
                    found[statement.value.value] = path.stem
                value = statement.value if target is not None else None
                if (isinstance(target, ast.Name) and target.id == "__table__"
                        and isinstance(value, ast.Call) and value.args
                        and isinstance(value.args[0], ast.Constant)):
                    found[value.args[0].value] = path.stem
    return found


def test_the_tables_module_alone_registers_every_table_of_the_store():
    # a fresh interpreter: nothing else imported first could register a table behind its back
    done = subprocess.run(
        [sys.executable, "-c", "from tracker.store.tables import metadata; "
                               "print('\\n'.join(sorted(metadata.tables)))"],
        capture_output=True, text=True, cwd=ROOT, check=True)
    declared = _declared_tables()
    assert len(declared) >= 12  # experiment, arm, impression, ..., api_key, rollup_*
    assert set(done.stdout.split()) == set(declared)
