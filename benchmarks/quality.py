"""Retrieval quality on ../shared/bench (LoCoMo daily + transcripts, CMRC 2018 Chinese).

For each dataset and mode (hybrid, keyword-only, vector-only) the workspaces are indexed with
mdrecall, every query is asked as of its ``as_of`` time, and the bench's own scorer reports
recall@1/5/10, MRR@10 and recall@budget (4,000 characters). A plain BM25 baseline over ~1,600-char
line-aligned chunks (the reference system's defaults) is computed in the same run.

    python benchmarks/quality.py                       # everything (about 5 minutes on 2 cores)
    python benchmarks/quality.py --datasets locomo-daily --modes keyword
    python benchmarks/quality.py --set chunking.tokens=128 --set query.temporalDecay.enabled=false
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from mdrecall import open_manager
from mdrecall.cli import parse_overrides
from mdrecall.config import MemoryConfig
from mdrecall.index.chunking import chunk_markdown

DATASETS = {
    "locomo-daily": ("locomo/daily/queries.jsonl", "locomo/daily/workspaces", ["memory"]),
    "locomo-transcripts": ("locomo/transcripts/queries.jsonl", "locomo/transcripts/workspaces", ["memory", "sessions"]),
    "cmrc": ("cmrc2018_zh/queries.jsonl", "cmrc2018_zh", ["memory"]),
}
MODES = {
    "hybrid": {},
    "keyword": {"provider": "none"},
    # The vectors alone, also where the product would skip them (an English-only model, CJK queries).
    "vector": {"query": {"hybrid": {"enabled": False}, "languageCheck": False}},
}


def default_bench_dir() -> Path:
    return Path(os.environ.get("MDRECALL_BENCH_DIR", ROOT.parent / "shared" / "bench"))


def load_queries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def workspace_dir(dataset: str, bench: Path, query: dict[str, Any]) -> Path:
    _, root, _ = DATASETS[dataset]
    if dataset == "cmrc":
        return bench / root / "workspace"
    return bench / root / query["workspace"]


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def run_mdrecall(dataset: str, mode: str, bench: Path, overrides: dict[str, Any], tmp: Path) -> tuple[Path, dict[str, Any]]:
    queries_rel, _, sources = DATASETS[dataset]
    queries = load_queries(bench / queries_rel)
    by_ws: dict[Path, list[dict[str, Any]]] = defaultdict(list)
    for q in queries:
        by_ws[workspace_dir(dataset, bench, q)].append(q)
    out_path = tmp / f"{dataset}-{mode}.jsonl"
    timings = {"index_s": 0.0, "search_s": 0.0, "queries": 0}
    config = _merge(_merge({"sources": sources, "dreaming": {"enabled": False}}, MODES[mode]), overrides)
    with out_path.open("w", encoding="utf-8") as out:
        for ws, items in sorted(by_ws.items()):
            # Index a private copy: the bench tree is read-only and must stay untouched.
            copy = tmp / "ws" / f"{dataset}-{ws.name}"
            if not copy.exists():
                shutil.copytree(ws, copy)
            # Modes that share an index identity (hybrid and vector-only) share the index.
            chunking = config.get("chunking", {})
            identity = f"{config.get('provider', 'auto')}-{chunking.get('tokens', 'd')}-{chunking.get('overlap', 'd')}"
            cfg = _merge(config, {"store": {"path": str(tmp / "idx" / f"{dataset}-{identity}-{ws.name}.sqlite")}})
            with open_manager(copy, cfg, use_global_config=False) as manager:
                t0 = time.perf_counter()
                manager.sync()
                timings["index_s"] += time.perf_counter() - t0
                t0 = time.perf_counter()
                for q in items:
                    now = datetime.fromisoformat(q["as_of"].replace("Z", "+00:00")) if q.get("as_of") else None
                    response = manager.search(q["query"], session_key="main", now=now)
                    results = [
                        {"path": r.path, "startLine": r.start_line, "endLine": r.end_line, "score": r.score}
                        for r in response.results
                    ]
                    out.write(json.dumps({"id": q["id"], "results": results}) + "\n")
                timings["search_s"] += time.perf_counter() - t0
                timings["queries"] += len(items)
    return out_path, timings


# -- plain BM25 baseline ----------------------------------------------------------------------------
_TOK = re.compile(r"\w+", re.UNICODE)


def _bm25_tokens(text: str) -> list[str]:
    out: list[str] = []
    for tok in _TOK.findall(text.lower()):
        if re.search(r"[\u4e00-\u9fff]", tok):
            out.extend(tok)  # character unigrams for Chinese
        else:
            out.append(tok)
    return out


def run_bm25_baseline(dataset: str, bench: Path, tmp: Path) -> Path:
    """Okapi BM25 (k1 1.2, b 0.75) over line-aligned ~1,600-char chunks, no stop words or stemming."""
    queries_rel, _, sources = DATASETS[dataset]
    queries = load_queries(bench / queries_rel)
    by_ws: dict[Path, list[dict[str, Any]]] = defaultdict(list)
    for q in queries:
        by_ws[workspace_dir(dataset, bench, q)].append(q)
    out_path = tmp / f"{dataset}-bm25.jsonl"
    with out_path.open("w", encoding="utf-8") as out:
        for ws, items in sorted(by_ws.items()):
            docs: list[tuple[str, int, int, list[str]]] = []
            for path in sorted(ws.rglob("*")):
                if not path.is_file():
                    continue
                rel = path.relative_to(ws).as_posix()
                if path.suffix == ".md":
                    text = path.read_text(encoding="utf-8")
                    for c in chunk_markdown(text, 400, 0):
                        docs.append((rel, c.start_line, c.end_line, _bm25_tokens(c.text)))
                elif path.suffix == ".jsonl" and "sessions" in sources:
                    lines = path.read_text(encoding="utf-8").splitlines()
                    contents = [str(json.loads(l).get("content", "")) for l in lines if l.strip()]
                    start, buf, size = 1, [], 0
                    for i, c in enumerate(contents, 1):
                        if buf and size + len(c) > 1600:
                            docs.append((rel, start, i - 1, _bm25_tokens(" ".join(buf))))
                            start, buf, size = i, [], 0
                        buf.append(c)
                        size += len(c)
                    if buf:
                        docs.append((rel, start, len(contents), _bm25_tokens(" ".join(buf))))
            n = len(docs)
            avgdl = sum(len(d[3]) for d in docs) / max(1, n)
            df: Counter[str] = Counter()
            tfs = []
            for d in docs:
                tf = Counter(d[3])
                tfs.append(tf)
                df.update(tf.keys())
            for q in items:
                terms = set(_bm25_tokens(q["query"]))
                scores = []
                for i, d in enumerate(docs):
                    tf = tfs[i]
                    s = 0.0
                    for t in terms:
                        f = tf.get(t)
                        if not f:
                            continue
                        idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                        s += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len(d[3]) / avgdl))
                    if s > 0:
                        scores.append((s, i))
                scores.sort(reverse=True)
                results = [
                    {"path": docs[i][0], "startLine": docs[i][1], "endLine": docs[i][2], "score": s} for s, i in scores[:10]
                ]
                out.write(json.dumps({"id": q["id"], "results": results}) + "\n")
    return out_path


def score(dataset: str, bench: Path, results: Path) -> dict[str, Any]:
    queries_rel, root, _ = DATASETS[dataset]
    ws_root = bench / root / ("workspace" if dataset == "cmrc" else "")
    cmd = [
        sys.executable,
        str(bench / "score.py"),
        str(bench / queries_rel),
        str(results),
        "--budget-chars",
        "4000",
        "--root",
        str(ws_root).rstrip("/"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def headline(metrics: dict[str, Any]) -> dict[str, float]:
    overall = metrics.get("overall", metrics)
    keys = ["recall@1", "recall@5", "recall@10", "mrr@10", "recall@budget"]
    return {k: round(float(overall[k]), 4) for k in keys if k in overall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, default=default_bench_dir())
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--modes", nargs="+", default=[*MODES, "bm25"], choices=[*MODES, "bm25"])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--out", type=Path, default=None, help="write all figures as JSON here")
    parser.add_argument("--keep", type=Path, default=None, help="work directory to keep (indexes, results)")
    args = parser.parse_args()
    if not (args.bench / "score.py").exists():
        print(f"bench data not found at {args.bench} (set MDRECALL_BENCH_DIR)", file=sys.stderr)
        return 2
    overrides = parse_overrides(args.set)
    MemoryConfig.model_validate(overrides)  # fail fast on a typo
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="mdrecall-quality-"))
    tmp.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"overrides": overrides, "results": {}}
    for dataset in args.datasets:
        for mode in args.modes:
            if mode == "bm25":
                t0 = time.perf_counter()
                path = run_bm25_baseline(dataset, args.bench, tmp)
                timings = {"total_s": round(time.perf_counter() - t0, 2)}
            else:
                path, timings = run_mdrecall(dataset, mode, args.bench, overrides, tmp)
            figures = headline(score(dataset, args.bench, path))
            report["results"][f"{dataset}/{mode}"] = {**figures, **{k: round(v, 2) for k, v in timings.items()}}
            print(f"{dataset:20s} {mode:8s} " + "  ".join(f"{k}={v}" for k, v in figures.items()), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    if args.keep is None:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
