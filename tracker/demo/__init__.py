"""``tracker demo``: a simulated recommender A/B test, logged and rolled up like a real one."""

from tracker.demo.load import LoadSummary, load
from tracker.demo.simulation import (
    ARMS,
    GUARDRAILS,
    PRIMARY,
    RELEVANCE,
    DayBatch,
    DemoConfig,
    assign_arm,
    experiment_spec,
    history,
    simulate,
)

__all__ = ["ARMS", "GUARDRAILS", "PRIMARY", "RELEVANCE", "DayBatch", "DemoConfig",
           "LoadSummary", "assign_arm", "experiment_spec", "history", "load",
           "simulate"]
