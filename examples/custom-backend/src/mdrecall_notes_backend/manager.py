"""``NotesManager``: every paragraph of every memory file is a document, ranked with BM25.

The index lives in memory and is rebuilt from the files on ``sync()`` (and before a search when a
file changed), which is all a small workspace needs. It reuses mdrecall's parts where the contract
asks for the same behaviour as every backend: file discovery and path checks
(``mdrecall.sources``), the read window (``read_memory_lines``), citations (``format_citation``) and
the listeners of :class:`mdrecall.ManagerBase` (so recall tracking works unchanged).
"""

from __future__ import annotations

import math
import os
import re
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from mdrecall import (
    ManagerBase,
    MemoryConfig,
    ProbeResult,
    ReadResult,
    SearchHit,
    SearchRequest,
    SearchResponse,
    Status,
    SyncReport,
)
from mdrecall.contract import AS_OF_UNSUPPORTED
from mdrecall.sources.reading import read_memory_lines
from mdrecall.sources.workspace import discover_memory_files
from mdrecall.types import ProgressCallback, SyncProgress, format_citation

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    "a an and are as at be by did do does for from has have how i in is it me my of on or our the to us was we were what when where which who why with you".split()
)
K1, B = 1.2, 0.75


def _stem(word: str) -> str:
    # Plurals only: "invoices" finds "invoice". A real backend would use a proper stemmer.
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _terms(text: str) -> list[str]:
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


@dataclass(frozen=True)
class Paragraph:
    path: str
    start: int
    end: int
    text: str
    counts: Counter[str]


class NotesManager(ManagerBase):
    backend = "notes"

    def __init__(self, workspace: Path, config: MemoryConfig) -> None:
        super().__init__(workspace, config)
        self._paragraphs: list[Paragraph] = []
        self._df: Counter[str] = Counter()
        self._seen: dict[str, tuple[int, int]] = {}  # path -> (mtime_ns, size) at the last sync
        self._last_sync: float | None = None
        self._closed = False

    # -- indexing -----------------------------------------------------------------------------
    def _files(self) -> dict[str, tuple[str, tuple[int, int]]]:
        out = {}
        for file in discover_memory_files(self.workspace, self.config):
            st = os.stat(file.abspath)
            out[file.rel_path] = (file.abspath, (st.st_mtime_ns, st.st_size))
        return out

    def sync(self, force: bool = False, progress: ProgressCallback | None = None) -> SyncReport:
        started = time.monotonic()
        files = self._files()
        changed = force or {p: stamp for p, (_a, stamp) in files.items()} != self._seen
        report = SyncReport(files_scanned=len(files))
        if not changed:
            report.files_unchanged = len(files)
            return report
        paragraphs: list[Paragraph] = []
        for done, (rel, (abspath, _stamp)) in enumerate(sorted(files.items()), 1):
            lines = Path(abspath).read_text(encoding="utf-8", errors="replace").split("\n")
            start: int | None = None
            for number, line in enumerate([*lines, ""], 1):
                if line.strip() and start is None:
                    start = number
                elif not line.strip() and start is not None:
                    text = "\n".join(lines[start - 1 : number - 1])
                    paragraphs.append(Paragraph(rel, start, number - 1, text, Counter(_terms(text))))
                    start = None
            if progress is not None:
                progress(SyncProgress(done, len(files), f"Indexing {rel}"))
        old = set(self._seen)
        self._paragraphs = paragraphs
        self._df = Counter(term for p in paragraphs for term in p.counts)
        self._seen = {p: stamp for p, (_a, stamp) in files.items()}
        self._last_sync = time.time()
        report.files_indexed = len(files)
        report.files_removed = len(old - set(files))
        report.chunks_written = len(paragraphs)
        report.full_rebuild = True
        report.seconds = time.monotonic() - started
        return report

    # -- the contract -------------------------------------------------------------------------
    def run_search(self, request: SearchRequest) -> SearchResponse:
        self.sync()  # cheap when nothing changed: one stat per file
        query, min_score = request.query, request.min_score
        terms = _terms(query)
        threshold = self.config.query.minScore if min_score is None else min_score
        n = len(self._paragraphs) or 1
        avg = sum(sum(p.counts.values()) for p in self._paragraphs) / n
        idf = {t: math.log(1 + (n - self._df[t] + 0.5) / (self._df[t] + 0.5)) for t in set(terms)}
        best = sum(idf.values()) or 1.0  # what a paragraph of average length holding every term once scores
        hits = []
        for p in self._paragraphs:
            length = sum(p.counts.values()) or 1
            raw = sum(idf[t] * p.counts[t] * (K1 + 1) / (p.counts[t] + K1 * (1 - B + B * length / avg)) for t in idf if p.counts[t])
            score = min(1.0, raw / best)  # absolute: 1.0 means "every query term", whatever the workspace
            if raw > 0 and score >= threshold:
                hits.append(SearchHit(p.path, p.start, p.end, round(score, 4), p.text, "memory", format_citation(p.path, p.start, p.end), None, score))
        hits.sort(key=lambda h: h.score, reverse=True)
        response = SearchResponse(hits[: request.max_results or self.config.query.maxResults], "keyword-only", "none", "bm25-paragraphs")
        if request.as_of is not None:  # paragraphs keep no dates: say so rather than pretend
            response.warnings.append(AS_OF_UNSUPPORTED.format(backend=self.backend))
        self._notify_search(query, response, request.session_key, request.now or datetime.now(UTC))
        return response

    def read_file(self, rel_path: str, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        result = read_memory_lines(self.workspace, self.config, rel_path, from_line, lines)
        self._notify_read(result.path, result.from_line, result.lines, datetime.now(UTC))
        return result

    def status(self) -> Status:
        files = self._files()
        clean = {p: stamp for p, (_a, stamp) in files.items()} == self._seen
        return Status(
            backend=self.backend,
            workspace_dir=str(self.workspace),
            files=len(self._seen),
            chunks=len(self._paragraphs),
            provider="none",
            model="bm25-paragraphs",
            search_mode="keyword-only",
            mode_reasons=["this backend ranks keywords only"],
            clean=clean,
            last_sync_at=datetime.fromtimestamp(self._last_sync, UTC).isoformat() if self._last_sync else None,
            details={"paragraphs": len(self._paragraphs), "terms": len(self._df)},
        )

    def probe_embedding_availability(self) -> ProbeResult:
        return ProbeResult(False, "the notes backend uses no embeddings")

    def probe_vector_availability(self) -> bool:
        return False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._run_close_hooks()
