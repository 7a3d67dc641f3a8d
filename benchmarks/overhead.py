"""Where a warm search's fixed cost goes at small sizes: CPU time of each pipeline stage.

Wraps the stages of ``search/pipeline.py`` (retrieval, scoring, supersession, the budget), the
per-candidate evidence of ``search/relevance.py``, the tokenizer and the freshness check with
thread-CPU accumulators, then runs the bench's real questions against an existing workspace and
index. Query vectors are computed once before the timed searches, so the figures exclude the query
embedding (measured by speed.py). Nothing is changed in the code measured.

    python benchmarks/overhead.py --workspace WS --store INDEX.sqlite --provider local --out overhead.json

Results: docs/benchmarks.md, "Per-query overhead at small sizes".
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import make_queries

STAGES = [
    ("mdrecall.search.pipeline", "retrieve", "retrieve: keyword + vector candidates, hydration"),
    ("mdrecall.search.pipeline", "rank_candidates", "rank_candidates: everything after retrieval"),
    ("mdrecall.search.pipeline", "score_candidates", "  score_candidates: evidence, calibration"),
    ("mdrecall.search.relevance", "evidence", "    relevance.evidence (once per candidate)"),
    ("mdrecall.search.pipeline", "supersede", "  supersede: knowledge-update detection"),
    ("mdrecall.search.pipeline", "pack", "  pack: the character budget, narrowing"),
]
METHODS = [
    ("mdrecall.search.corpus", "IndexCorpus", "tokens", "      corpus.tokens (lines of candidates)"),
    ("mdrecall.freshness.monitor", "FreshnessMonitor", "before_search", "before_search: freshness"),
]


def instrument(acc: dict[str, float], calls: dict[str, int]) -> None:
    import importlib

    def wrapped(fn: Any, label: str) -> Any:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                acc[label] = acc.get(label, 0.0) + time.thread_time() - started
                calls[label] = calls.get(label, 0) + 1

        return inner

    for module, name, label in STAGES:
        mod = importlib.import_module(module)
        setattr(mod, name, wrapped(getattr(mod, name), label))
    for module, cls, name, label in METHODS:
        klass = getattr(importlib.import_module(module), cls)
        setattr(klass, name, wrapped(getattr(klass, name), label))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--provider", default="local")
    parser.add_argument("--queries", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--config", default="{}", help="JSON merged over the config (e.g. '{\"sync\": {\"watch\": true}}')")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    acc: dict[str, float] = {}
    calls: dict[str, int] = {}
    instrument(acc, calls)
    from mdrecall import open_manager

    queries = make_queries(Path(args.workspace), args.queries + 10)
    config = {"provider": args.provider, "store": {"path": args.store}, "sync": {"watch": False}}
    for key, value in json.loads(args.config).items():
        config[key] = {**config[key], **value} if isinstance(value, dict) and isinstance(config.get(key), dict) else value
    m = open_manager(args.workspace, config, use_global_config=False)
    try:
        m.sync()
        chunks = m.status().chunks
        provider = m.provider
        if provider is not None:
            vectors = {q: provider.embed_query(q) for q in queries}
            provider.embed_query = vectors.__getitem__  # type: ignore[method-assign]
        for q in queries[:10]:
            m.search(q)
        rounds = []
        for _ in range(args.rounds):
            acc.clear()
            calls.clear()
            started = time.thread_time()
            for q in queries[10:]:
                m.search(q)
            n = len(queries) - 10
            row: dict[str, Any] = {"search_cpu_ms": round((time.thread_time() - started) / n * 1000, 3)}
            row.update({label: round(acc.get(label, 0.0) / n * 1000, 3) for _, _, label in STAGES})
            row.update({label: round(acc.get(label, 0.0) / n * 1000, 3) for *_, label in METHODS})
            row["calls_per_search"] = {label: round(c / n, 1) for label, c in calls.items()}
            rounds.append(row)
        m.flush()
    finally:
        m.close()
    best = min(rounds, key=lambda r: r["search_cpu_ms"])
    out = {"chunks": chunks, "provider": args.provider, "searches_per_round": len(queries) - 10, "rounds": rounds,
           "least_loaded_round": best, "loadavg": [round(x, 2) for x in os.getloadavg()],
           "note": "thread CPU time per search, query embedding excluded; the wrappers add ~1 us per call"}
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
