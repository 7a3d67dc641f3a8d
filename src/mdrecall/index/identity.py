"""What an index was built from: provider, model, chunking, sources, roots.

The live index stores this as its meta row. When the configuration asks for something else (another
model, other chunk sizes, other extra paths), the stored chunks do not fit and the index is rebuilt
from the files; until then vector search is paused so one model's vectors are never compared with
another's query.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mdrecall.config import MemoryConfig
from mdrecall.embeddings.base import EmbeddingProvider, provider_key
from mdrecall.sources.workspace import extra_path_roots
from mdrecall.store.db import SCHEMA_VERSION

#: The meta keys that describe the vectors (the rest describes the text and what was indexed).
EMBEDDING_KEYS = frozenset({"provider", "model", "providerKey", "vectorDims"})

#: The provider key of a keyword-only index.
KEYWORD_ONLY_KEY = provider_key({"provider": "none", "model": "fts-only"})


#: What the index holds for the same bytes: bump it when that changes (redaction, transcript
#: rendering, remember's provenance comments left out, transcript chunks storing the message of each
#: line), so existing indexes are rebuilt instead of keeping what the old code stored (a secret
#: redaction now removes, a sender id now stripped). Part of the scope hash.
CONTENT_VERSION = 3


def scope_hash(workspace: Path, config: MemoryConfig) -> str:
    roots = sorted(p.as_posix() for p in extra_path_roots(workspace, config))
    return provider_key({"extraPaths": roots, "maxFileBytes": config.limits.maxFileBytes, "sessionsDir": config.sessions.dir,
                         "content": CONTENT_VERSION})


def desired_meta(workspace: Path, config: MemoryConfig, provider: EmbeddingProvider | None, key: str) -> dict[str, Any]:
    """The meta row an index built now, with this provider, would carry."""
    return {
        "schemaVersion": SCHEMA_VERSION,
        "model": provider.model if provider else "fts-only",
        "provider": provider.id if provider else "none",
        "providerKey": key,
        "sources": sorted(config.sources),
        "scopeHash": scope_hash(workspace, config),
        "chunkTokens": config.chunking.tokens,
        "chunkOverlap": config.chunking.overlap,
        "vectorDims": provider.dims if provider else None,
        "ftsTokenizer": config.query.fts.tokenizer,
    }


def identity_mismatch(stored: dict[str, Any] | None, desired: dict[str, Any], *, ignore_unknown: bool = False) -> str | None:
    """Why ``stored`` does not fit ``desired``, or None. ``ignore_unknown``: a desired value of None
    (dims of a remote model not probed yet) is not a mismatch."""
    if stored is None:
        return "no index yet"
    for key, value in desired.items():
        if ignore_unknown and value is None:
            continue
        if stored.get(key) != value:
            return f"{key} changed ({stored.get(key)!r} → {value!r})"
    return None
