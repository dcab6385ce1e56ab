"""Validation and normalisation of experiments, impressions and interactions: the one
validation layer every way in calls (Tracker, DataFrames, file imports, the collector, the
HTTP client).

Every record is checked before anything is written; a record that breaks a rule is rejected
with the field and the reason. The rules live by concern:

- :mod:`tracker.ingest.fields`: single fields (ids, keys, instants, served lists, scores,
  values, context), :class:`Limits` and :class:`Reject`;
- :mod:`tracker.ingest.records`: whole impression and interaction records
  (:class:`ImpressionNormalizer`, :class:`InteractionNormalizer`): known fields, existing
  experiment and arm, the event-type policy of the governing experiment;
- :mod:`tracker.ingest.experiments`: a new experiment's settings, metric roles and later
  changes (:func:`experiment_fields`, :func:`check_roles`, :func:`experiment_update_fields`).

This module re-exports their public names, so callers import from one place.
"""

from tracker.ingest.experiments import (
    check_loss,
    check_role_metric,
    check_roles,
    experiment_fields,
    experiment_update_fields,
)
from tracker.ingest.fields import (
    EVENT_TYPE_LENGTH,
    MAX_CONTEXT_BYTES,
    MAX_CONTEXT_DEPTH,
    SHOWN_CHARACTERS,
    Limits,
    Reject,
    check_context,
    check_fields,
    check_id,
    check_instant,
    check_items,
    check_key,
    check_list,
    check_number,
    check_optional_id,
    check_scores,
    check_text,
    check_value,
    instant_micros,
    instant_micros_of_datetime64,
    is_clean_text,
    shown,
    shown_id,
)
from tracker.ingest.records import (
    IMPRESSION_COLUMNS,
    IMPRESSION_FIELDS,
    INTERACTION_COLUMNS,
    INTERACTION_FIELDS,
    ImpressionNormalizer,
    InteractionNormalizer,
    Unreadable,
    raise_for,
)

__all__ = [
    "EVENT_TYPE_LENGTH",
    "IMPRESSION_COLUMNS",
    "IMPRESSION_FIELDS",
    "INTERACTION_COLUMNS",
    "INTERACTION_FIELDS",
    "MAX_CONTEXT_BYTES",
    "MAX_CONTEXT_DEPTH",
    "SHOWN_CHARACTERS",
    "ImpressionNormalizer",
    "InteractionNormalizer",
    "Limits",
    "Reject",
    "Unreadable",
    "check_context",
    "check_fields",
    "check_id",
    "check_instant",
    "check_items",
    "check_key",
    "check_list",
    "check_loss",
    "check_number",
    "check_optional_id",
    "check_role_metric",
    "check_roles",
    "check_scores",
    "check_text",
    "check_value",
    "experiment_fields",
    "experiment_update_fields",
    "instant_micros",
    "instant_micros_of_datetime64",
    "is_clean_text",
    "raise_for",
    "shown",
    "shown_id",
]
