"""HTTP collector: production services log impressions and interactions over the network.

``create_app`` builds the FastAPI application; ``tracker serve`` runs it on uvicorn.
"""

from tracker.install import require

require("server", "tracker.collector")  # before FastAPI is imported: one clear error

from tracker.collector.app import create_app  # noqa: E402

__all__ = ["create_app"]
