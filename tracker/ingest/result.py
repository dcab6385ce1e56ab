"""What a logging call did: stored, duplicates, conflicts, rejected (with reasons)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Rejection:
    """One record that was not stored because it is invalid.

    ``index`` is the record's position in the input (0-based; for file imports, the data row
    number), ``id`` its client id when it had a readable one.
    """

    index: int
    id: str | None
    field: str | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.field}: " if self.field else ""
        who = f" (id {self.id!r})" if self.id else ""
        return f"record {self.index}{who}: {where}{self.reason}"


@dataclass
class IngestResult:
    """Outcome of a logging call.

    - ``stored``: new records written;
    - ``duplicates``: records whose id was already stored with the same payload (a retry):
      nothing new stored, not an error;
    - ``conflict_ids``: ids already stored with a *different* payload: not stored, the first
      version is kept;
    - ``rejected``: invalid records, with the reason; not stored.
    """

    kind: str
    stored: int = 0
    duplicates: int = 0
    conflict_ids: list[str] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    @property
    def conflicts(self) -> int:
        return len(self.conflict_ids)

    @property
    def received(self) -> int:
        return self.stored + self.duplicates + self.conflicts + len(self.rejected)

    def merge(self, other: IngestResult, index_offset: int = 0) -> None:
        """Add another batch's outcome to this one (its record indexes shifted by the offset)."""
        self.stored += other.stored
        self.duplicates += other.duplicates
        self.conflict_ids.extend(other.conflict_ids)
        self.rejected.extend(
            Rejection(r.index + index_offset, r.id, r.field, r.reason) for r in other.rejected)

    def summary(self) -> str:
        return (f"{self.kind}: {self.received} received, {self.stored} stored, "
                f"{self.duplicates} duplicates, {self.conflicts} conflicts, "
                f"{len(self.rejected)} rejected")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "received": self.received, "stored": self.stored,
            "duplicates": self.duplicates, "conflicts": self.conflicts,
            "conflict_ids": list(self.conflict_ids),
            "rejected": [{"index": r.index, "id": r.id, "field": r.field, "reason": r.reason}
                         for r in self.rejected],
        }
