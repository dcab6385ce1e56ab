"""``tracker demo``: a simulated recommender A/B test, logged and rolled up like a real one."""

from tracker.demo.history import history, pre_period, previous_spec
from tracker.demo.load import LoadSummary, load
from tracker.demo.simulation import (
    ARMS,
    GUARDRAILS,
    PRIMARY,
    RELEVANCE,
    SEGMENTS,
    SURFACES,
    DayBatch,
    DemoConfig,
    assign_arm,
    experiment_spec,
    new_users,
    simulate,
)

__all__ = ["ARMS", "GUARDRAILS", "PRIMARY", "RELEVANCE", "SEGMENTS", "SURFACES",
           "DayBatch", "DemoConfig", "LoadSummary", "assign_arm", "experiment_spec",
           "history", "load", "new_users", "pre_period", "previous_spec", "simulate"]
