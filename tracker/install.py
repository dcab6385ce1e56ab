"""How tracker is installed: its distribution name, its optional extras, and the folders the
wheel ships inside the package.

- The distribution is ``recsys-tracker`` (``tracker`` on the package index is an unrelated
  project); the import package and the command are ``tracker``.
- The core (SDK, HTTP client, store on SQLite, rollup, statistics, report, CLI) needs no extra.
  A command that needs one calls :func:`require` first, so a missing extra is one message
  naming the ``pip install`` line, never a traceback from deep inside an import.
- ``migrations/`` and ``dashboard/`` are top-level folders of the repository; the wheel ships
  them as ``tracker/_migrations`` and ``tracker/_dashboard/dashboard`` (see ``setup.py``).
  :func:`shipped` finds them in either place.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from tracker.errors import MissingExtra, TrackerError

DISTRIBUTION = "recsys-tracker"

EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "uvicorn", "prometheus_client"),
    "dashboard": ("streamlit",),
    "postgres": ("psycopg", "adbc_driver_postgresql"),
    "spark": ("pyspark",),
}
"""Each extra of ``pyproject.toml`` (but ``all`` and ``dev``) and the modules it provides."""

PACKAGE = Path(__file__).resolve().parent


def missing_modules(extra: str) -> tuple[str, ...]:
    """The modules of ``extra`` that cannot be imported (found without importing them)."""
    return tuple(module for module in EXTRAS[extra] if importlib.util.find_spec(module) is None)


def require(extra: str, needed_by: str) -> None:
    """Raise :class:`~tracker.errors.MissingExtra` unless every module of ``extra`` is
    installed; ``needed_by`` names what needs it (``"tracker serve"``).

    >>> require("no-such-extra", "x")
    Traceback (most recent call last):
    ...
    ValueError: unknown extra 'no-such-extra'; the extras are server, dashboard, postgres, spark
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; the extras are {', '.join(EXTRAS)}")
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(f"{needed_by} needs the {extra} extra ({', '.join(missing)} not "
                           f"installed): pip install '{DISTRIBUTION}[{extra}]'")


@dataclass(frozen=True)
class Shipped:
    """A repository folder the wheel ships inside the package: ``folder`` at the top of a
    source checkout, ``installed`` (relative to the package) in a wheel; ``marker`` is a file
    that only the real folder holds."""

    folder: str
    installed: str
    marker: str

    def candidates(self) -> tuple[Path, Path]:
        """Where to look, in order: the installed copy inside the package (unambiguous), then
        the folder next to the package in a source checkout."""
        return PACKAGE / self.installed, PACKAGE.parent / self.folder


MIGRATIONS = Shipped("migrations", "_migrations", "env.py")
DASHBOARD = Shipped("dashboard", "_dashboard/dashboard", "app.py")


def shipped(what: Shipped) -> Path:
    """The folder ``what`` of this installation, from an installed wheel or a source checkout
    alike, whatever the working directory."""
    for path in what.candidates():
        if (path / what.marker).is_file():
            return path
    looked = " and ".join(str(path) for path in what.candidates())
    raise TrackerError(f"{what.folder}/ not found (looked in {looked}): reinstall "
                       f"{DISTRIBUTION}, or run tracker from its source tree")
