"""Whether Spark can run here, and why not: Spark tests skip with that reason."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def skip_reason() -> str | None:
    """None when pyspark and a Java runtime are both there; otherwise what is missing."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (the spark extra: pip install 'recsys-tracker[spark]')"
    if _java() is None:
        return "no Java runtime for Spark (neither JAVA_HOME nor java on PATH; Java 17+)"
    return None


SKIP_REASON = skip_reason()
