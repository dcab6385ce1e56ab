"""The wheel's layout (everything else is in pyproject.toml).

``migrations/`` and ``dashboard/`` stay top-level folders of the repository, the layout the
project is known by, and ship inside the ``tracker`` package of the wheel through a
``package_dir`` mapping:

- ``migrations/`` → ``tracker/_migrations/`` (Alembic reads it by path; nothing imports it);
- ``dashboard/`` → ``tracker/_dashboard/dashboard/``: the Streamlit pages ``import dashboard``
  by name, so the folder put on ``sys.path`` (``tracker/_dashboard``) holds that package and
  nothing else.

:func:`tracker.install.shipped` finds them in both places: in the installed package, or next
to it in a source checkout (editable install, or ``PYTHONPATH``).
"""

from setuptools import find_namespace_packages, find_packages, setup

SHIPPED = {"tracker._migrations": "migrations", "tracker._dashboard.dashboard": "dashboard"}


def shipped_packages(package: str, folder: str) -> list[str]:
    """``package`` and one subpackage per subfolder of ``folder`` (``migrations/versions`` has
    no ``__init__.py``, hence namespace discovery)."""
    below = find_namespace_packages(where=folder, exclude=["__pycache__", "*.__pycache__"])
    return [package] + [f"{package}.{name}" for name in below]


setup(
    packages=find_packages(include=["tracker", "tracker.*"])
    + [name for package, folder in SHIPPED.items() for name in shipped_packages(package, folder)],
    package_dir=SHIPPED,
    package_data={"tracker": ["py.typed"], "tracker._migrations": ["script.py.mako"]},
)
