"""The rows of the long-term memory table: its schema (one per embedding model), a row as Python
reads it, a new row as it is written, and the helpers both need (unit vectors, the duplicate key,
SQL quoting for LanceDB filters)."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from mdrecall.backends.lancedb.capture import normalized_key
from mdrecall.errors import StoreError

META_IDENTITY = b"mdrecall.identity"
META_DIMS = b"mdrecall.dims"
COLUMNS = ("id", "text", "importance", "category", "createdAt", "agentId", "source", "sessionKey", "provenance", "textHash")


def text_hash(text: str) -> str:
    return hashlib.sha1(normalized_key(text).encode("utf-8")).hexdigest()[:16]


def quote(value: str) -> str:
    """A SQL string literal for LanceDB filters."""
    return "'" + value.replace("'", "''") + "'"


def schema_for(dims: int, identity: dict[str, Any]) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dims), nullable=False),
            pa.field("importance", pa.float32()),
            pa.field("category", pa.string()),
            pa.field("createdAt", pa.int64()),
            pa.field("agentId", pa.string()),
            pa.field("source", pa.string()),
            pa.field("sessionKey", pa.string()),
            pa.field("provenance", pa.string()),
            pa.field("textHash", pa.string()),
        ],
        metadata={META_IDENTITY: json.dumps(identity, sort_keys=True).encode(), META_DIMS: str(dims).encode()},
    )


def unit_rows(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """Vectors scaled to length 1, so cosine distance is ``1 - dot`` whatever the provider returns."""
    m = np.asarray(vectors, dtype=np.float32)
    if m.ndim != 2:
        raise StoreError("embedding provider returned no vectors")
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


@dataclass
class Row:
    id: str
    text: str
    importance: float
    category: str
    created_at: int
    agent_id: str
    source: str
    session_key: str | None
    provenance: dict[str, Any]
    score: float | None = None

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Row:
        score = None
        if rec.get("_distance") is not None:
            score = max(0.0, min(1.0, 1.0 - float(rec["_distance"])))
        try:
            provenance = json.loads(rec.get("provenance") or "{}")
        except ValueError:
            provenance = {}
        return cls(
            id=rec["id"], text=rec["text"], importance=float(rec.get("importance") or 0.0),
            category=rec.get("category") or "other", created_at=int(rec.get("createdAt") or 0),
            agent_id=rec.get("agentId") or "", source=rec.get("source") or "", session_key=rec.get("sessionKey"),
            provenance=provenance if isinstance(provenance, dict) else {}, score=score,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "text": self.text, "category": self.category, "importance": round(self.importance, 3),
            "createdAt": self.created_at, "agentId": self.agent_id, "source": self.source,
            "sessionKey": self.session_key, "provenance": self.provenance,
        }
        if self.score is not None:
            out["score"] = round(self.score, 4)
        return out


def new_record(
    text: str, vector: np.ndarray, *, importance: float, category: str, agent_id: str, source: str,
    session_key: str | None, provenance: dict[str, Any], memory_id: str | None = None, created_at: int | None = None,
) -> dict[str, Any]:
    return {
        "id": memory_id or str(uuid.uuid4()),
        "text": text,
        "vector": vector.astype(np.float32).tolist(),
        "importance": float(importance),
        "category": category,
        "createdAt": int(created_at if created_at is not None else time.time() * 1000),
        "agentId": agent_id,
        "source": source,
        "sessionKey": session_key,
        "provenance": json.dumps(provenance, ensure_ascii=False, sort_keys=True),
        "textHash": text_hash(text),
    }
