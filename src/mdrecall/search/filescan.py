"""The last step of the degradation chain: memory files the index does not hold yet, read directly.

A search that could not bring the index up to date first (the first index is still being built by
another thread or process, ``sync.onSearch`` is off, the index is read-only) would miss every file
not indexed yet; on a workspace never indexed, that is everything, and an agent told "no
candidates" concludes its memory is empty. So those files (new, or changed since the last sync) are
read here as the indexer reads them (the same path checks, secrets redacted), chunked as it chunks
them and matched by keyword; their hits are scored by the same pipeline (``file-scan`` mode, the
statistics of the chunks read) and merged with the index's, best first, within the same budget.

Bounded: at most ``MAX_FILES`` files and ``MAX_BYTES`` bytes, read newest first, for at most
``MAX_SECONDS``; the response says how many files were read and how many were left.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from mdrecall.config import MemoryConfig
from mdrecall.index.chunking import chunk_markdown
from mdrecall.index.indexer import read_memory_text
from mdrecall.search.corpus import CandidateCorpus
from mdrecall.search.keyword import Candidate
from mdrecall.search.pipeline import SearchPlan, candidate_limit, rank_candidates
from mdrecall.sources.workspace import MemoryFile, allowed_roots, discover_memory_files
from mdrecall.text import query_terms, term_stems
from mdrecall.types import SearchHit

#: Most files one search reads directly.
MAX_FILES = 2000
#: Most bytes one search reads directly.
MAX_BYTES = 8 * 2**20
#: Longest one search spends reading and matching them.
MAX_SECONDS = 1.5


@dataclass(slots=True)
class ScanResult:
    """What a direct scan found and how far it got."""

    hits: list[SearchHit] = field(default_factory=list)
    #: The files read (workspace-relative paths).
    read: set[str] = field(default_factory=set)
    #: Files not indexed yet that the bounds left unread.
    left: int = 0
    #: Whether any chunk held a query term (false: nothing to rank at all).
    candidates: bool = False

    def note(self) -> str:
        """What the response says about the scan."""
        text = f"{len(self.read)} memory file(s) not indexed yet were read directly (keyword match only)"
        if self.left:
            text += f"; {self.left} more were not read (the direct read is bounded; they are searchable once indexed)"
        return text


class ScanCorpus(CandidateCorpus):
    """The candidates' statistics with N = every chunk read: a chunk without any query term's stem
    in its text cannot hold the term, so the candidates' document frequencies are exact."""

    def __init__(self, candidates: Sequence[Candidate], chunks: int) -> None:
        super().__init__(candidates, [])
        self._chunks = max(chunks, len(candidates))

    def chunk_count(self) -> int:
        return self._chunks


def scan_unindexed(workspace: os.PathLike[str] | str, config: MemoryConfig, paths: Collection[str],
                   plan: SearchPlan, indexed: Mapping[str, str] | None = None) -> ScanResult:  # fmt: skip
    """Read the memory files named by ``paths`` (workspace-relative) and rank their chunks for
    ``plan``. ``indexed``: the content hash the index holds per path; a file found identical (only
    touched) is left to the index's hits."""
    from pathlib import Path

    root = Path(workspace)
    out = ScanResult()
    wanted = set(paths)
    if not wanted:
        return out
    files = [f for f in discover_memory_files(root, config) if f.rel_path in wanted and f.source == "memory"]
    files.sort(key=_mtime, reverse=True)  # the newest notes first, when the bounds cut the scan short
    stems = term_stems(query_terms(plan.query))
    roots = [str(r) for r in allowed_roots(root, config)]
    deadline = time.monotonic() + MAX_SECONDS
    candidates: list[Candidate] = []
    chunks = read_bytes = 0
    for number, file in enumerate(files):
        if number >= MAX_FILES or read_bytes >= MAX_BYTES or time.monotonic() > deadline:
            out.left = len(files) - number
            break
        text, raw, _reason = read_memory_text(root, config, file, roots)
        if text is None or raw is None:
            continue  # unreadable, too large, not UTF-8: the index will skip it too (and say why)
        read_bytes += len(raw)
        if indexed and indexed.get(file.rel_path) == hashlib.sha256(raw).hexdigest():
            continue  # touched, not changed: the index holds it as it is
        out.read.add(file.rel_path)
        for chunk in chunk_markdown(text, config.chunking.tokens, config.chunking.overlap):
            chunks += 1
            lowered = chunk.text.lower()
            hits = sum(min(lowered.count(stem), 3) for stem in stems if stem in lowered)
            if hits:
                candidates.append(Candidate(-chunks, file.rel_path, "memory", chunk.start_line, chunk.end_line,
                                            chunk.text, float(hits)))  # fmt: skip
    if not candidates:
        return out
    out.candidates = True
    corpus = ScanCorpus(candidates, chunks)  # every matching chunk: its document frequencies
    candidates.sort(key=lambda c: c.score, reverse=True)
    ranked = candidates[: candidate_limit(config, plan.max_results, plan.as_of)]
    outcome = rank_candidates(config, plan, ranked, [], "file-scan", [], False, corpus=corpus)
    out.hits = outcome.results
    return out


def merge_hits(indexed: Sequence[SearchHit], scanned: Sequence[SearchHit], replaced: Collection[str],
               limit: int, max_chars: int) -> list[SearchHit]:  # fmt: skip
    """The index's hits (less those of ``replaced`` files: changed or deleted since it was built) and
    the scan's, best first, at most ``limit`` and ``max_chars`` of snippets (the first always kept)."""
    merged = sorted([*(h for h in indexed if h.path not in replaced), *scanned], key=lambda h: h.score, reverse=True)
    out: list[SearchHit] = []
    used = 0
    for hit in merged:
        if len(out) >= limit:
            break
        if out and used + len(hit.snippet) > max_chars:
            continue
        out.append(hit)
        used += len(hit.snippet)
    return out


def _mtime(file: MemoryFile) -> float:
    try:
        return os.stat(file.abspath).st_mtime
    except OSError:
        return 0.0


__all__ = ["MAX_BYTES", "MAX_FILES", "MAX_SECONDS", "ScanCorpus", "ScanResult", "merge_hits", "scan_unindexed"]
