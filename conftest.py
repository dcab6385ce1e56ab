"""pytest's settings for the whole tree (tests/conftest.py holds the database fixtures).

The doctest run imports every module of tracker/; those of tracker/spark import pyspark, so
without the spark extra they are left out (tests/spark says why its tests skip).
"""

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("pyspark") else ["tracker/spark/*"]
