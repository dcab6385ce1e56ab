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
    pre_period,
    previous_spec,
    simulate,
)

__all__ = ["ARMS", "GUARDRAILS", "PRIMARY", "RELEVANCE", "DayBatch", "DemoConfig",
           "LoadSummary", "assign_arm", "experiment_spec", "history", "load",
           "pre_period", "previous_spec", "simulate"]
