"""tracker: online A/B experiment tracking for recommender systems.

``from tracker import Tracker`` logs experiments, served lists and interactions;
``tracker.metrics`` holds the ranking metrics; ``tracker.stats`` the statistics.
"""

from tracker.errors import (
    ConflictError,
    NotFound,
    RollupIncomplete,
    SchemaOutdated,
    StoreError,
    StoreUnavailable,
    TrackerError,
    ValidationError,
)
from tracker.ingest.result import IngestResult, Rejection
from tracker.sdk import Tracker

__version__ = "0.1.0"

__all__ = [
    "ConflictError", "IngestResult", "NotFound", "Rejection", "RollupIncomplete",
    "SchemaOutdated", "StoreError",
    "StoreUnavailable", "Tracker", "TrackerError", "ValidationError", "__version__",
]
