"""One short-term recall entry (the seed's ``ShortTermRecallEntry``) and its JSON form.

Seed fields keep their camelCase names in the JSON file. Fields mdrecall adds, and why:
``source`` ("memory"/"sessions"), ``heading`` (context shown with the fact), ``passage`` (a hit that
matched no query word, kept whole), ``totalRelevance`` (scores relative to the best hit of each search,
see scoring.py), ``claimHash`` (identity of the text), ``lastDay``/``lastDayQueries`` (exact
per-day query de-duplication), ``lastGroundedDay``, and the review states ``stagedAt``/``rejectedAt``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

MAX_QUERY_HASHES = 32
MAX_RECALL_DAYS = 16
MAX_CONCEPT_TAGS = 8


@dataclass
class RecallEntry:
    key: str
    path: str
    start_line: int
    end_line: int
    snippet: str
    source: str = "memory"
    heading: str | None = None
    passage: bool = False
    recall_count: int = 0
    daily_count: int = 0
    grounded_count: int = 0
    total_score: float = 0.0
    max_score: float = 0.0
    total_relevance: float = 0.0
    first_recalled_at: str = ""
    last_recalled_at: str = ""
    query_hashes: list[str] = field(default_factory=list)
    recall_days: list[str] = field(default_factory=list)
    concept_tags: list[str] = field(default_factory=list)
    claim_hash: str = ""
    last_day: str | None = None
    last_day_queries: list[str] = field(default_factory=list)
    last_grounded_day: str | None = None
    promoted_at: str | None = None
    staged_at: str | None = None
    rejected_at: str | None = None

    @property
    def signal_count(self) -> int:
        return self.recall_count + self.daily_count + self.grounded_count

    @property
    def unique_queries(self) -> int:
        return len(self.query_hashes)

    @property
    def short_id(self) -> str:
        return self.claim_hash

    def to_json(self) -> dict[str, Any]:
        # Hot path (every search re-writes the store): a comprehension over __dict__, no fields() calls.
        return {_CAMEL[k]: v for k, v in self.__dict__.items() if v is not None or k not in _OPTIONAL}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecallEntry:
        """Tolerant of missing fields (older files, hand edits); raises ValueError when unusable."""
        if not isinstance(data, dict):
            raise ValueError("entry is not an object")
        for required in ("key", "path", "snippet"):
            if not isinstance(data.get(required), str) or not data[required]:
                raise ValueError(f"entry lacks {required}")
        kwargs = {name: data[camel] for name, camel in _NAMES if camel in data}
        kwargs["start_line"] = int(data.get("startLine") or 1)
        kwargs["end_line"] = int(data.get("endLine") or 1)
        try:
            entry = cls(**kwargs)
        except TypeError as exc:
            raise ValueError(str(exc)) from None
        entry._coerce()
        return entry

    def _coerce(self) -> None:
        """Repair hand-edited or foreign values; cheap when everything already has the right type."""
        for name in ("recall_count", "daily_count", "grounded_count"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                setattr(self, name, max(0, int(value or 0)))
        for name in ("total_score", "max_score", "total_relevance"):
            value = getattr(self, name)
            if type(value) is not float or value < 0:
                setattr(self, name, max(0.0, float(value or 0.0)))
        for name, cap in _CAPS:
            value = getattr(self, name)
            if type(value) is not list or len(value) > cap or not all(type(v) is str for v in value):
                value = value if isinstance(value, list) else []
                setattr(self, name, [str(v) for v in value if isinstance(v, str)][-cap:])
        days = self.recall_days
        if any(days[i] >= days[i + 1] for i in range(len(days) - 1)):
            self.recall_days = sorted(set(days))[-MAX_RECALL_DAYS:]
        self.passage = bool(self.passage)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_CAMEL = {f.name: _camel(f.name) for f in fields(RecallEntry)}
# (attribute, JSON name) in declaration order; the first five are the constructor's required fields.
_NAMES = tuple(_CAMEL.items())
_CAPS = (("query_hashes", MAX_QUERY_HASHES), ("recall_days", MAX_RECALL_DAYS),
         ("concept_tags", MAX_CONCEPT_TAGS), ("last_day_queries", MAX_QUERY_HASHES))
_OPTIONAL = {"heading", "last_day", "last_grounded_day", "promoted_at", "staged_at", "rejected_at"}
