"""Documentation models of the collector's requests and responses (OpenAPI).

Request bodies are *not* parsed through these models: the collector hands the decoded JSON
to :mod:`tracker.ingest`, the same validation the SDK uses, so HTTP and in-process logging
accept and refuse exactly the same events. These models describe that contract for the
OpenAPI document.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Id = str | int


class ImpressionIn(BaseModel):
    """One served recommendation list."""

    model_config = ConfigDict(extra="forbid")

    impression_id: Id = Field(description="client id; a retry repeats it (idempotency key)")
    experiment: str
    arm: str
    user_id: Id
    items: list[Id] = Field(min_length=1, description="item ids in served order, no repeats")
    served_at: datetime = Field(description="ISO 8601; without a zone offset it is UTC; from "
                                            "TRACKER_MIN_EVENT_TIME to a few minutes ahead")
    scores: list[float] | None = Field(default=None, description="one per item")
    baseline_items: list[Id] | None = Field(
        default=None, description="what the control model would have served for this request")
    context: dict[str, Any] | None = Field(
        default=None, description="string keys, JSON values; at most 8 levels deep and 64 KiB "
                                  "as JSON")


class InteractionIn(BaseModel):
    """One user event on an item."""

    model_config = ConfigDict(extra="forbid")

    event_id: Id = Field(description="client id; a retry repeats it (idempotency key)")
    user_id: Id
    item_id: Id
    event: str = Field(description="click, play, save, purchase... (the experiment's mapping)")
    occurred_at: datetime = Field(description="ISO 8601; without a zone offset it is UTC; from "
                                              "TRACKER_MIN_EVENT_TIME to a few minutes ahead")
    value: float | None = None
    impression_id: Id | None = Field(
        default=None, description="attribute the event to this impression only")


class RejectionOut(BaseModel):
    index: int = Field(description="position of the event in the request (0-based)")
    id: str | None
    field: str | None
    reason: str


class IngestOut(BaseModel):
    """What the request did. ``conflict_ids``: ids already stored with a different payload
    (the stored version is kept)."""

    kind: str
    received: int
    stored: int
    duplicates: int
    conflicts: int
    conflict_ids: list[str]
    rejected: list[RejectionOut]


class ErrorOut(BaseModel):
    error: str = Field(description="a stable code, e.g. invalid_events, unauthorized")
    message: str
    request_id: str
    rejected: list[RejectionOut] | None = None


class HealthOut(BaseModel):
    status: str
    database: str
    schema_revision: str | None = None


def body_schema(model: type[BaseModel], max_batch: int) -> dict[str, Any]:
    """OpenAPI ``requestBody`` for one event (an object) or a batch (an array of them)."""
    one = model.model_json_schema()
    one.pop("title", None)
    return {
        "required": True,
        "content": {"application/json": {"schema": {
            "oneOf": [one, {"type": "array", "items": one, "maxItems": max_batch}],
        }}},
    }
