"""HTTP collector: production services log impressions and interactions over the network.

``create_app`` builds the FastAPI application; ``tracker serve`` runs it on uvicorn.
"""

from tracker.collector.app import create_app

__all__ = ["create_app"]
