"""Fit the score calibration (search/relevance.py) on the development benchmarks.

For every query of the chosen datasets, the search's candidates (keyword and vector) are gathered
with their evidence, exactly as a search computes it, and labelled 1 when the chunk holds a gold
line. Logistic regressions then give:

* the keyword model: P(relevant | coverage, bm25, mass),
* per embedding model, the cosine's offset and scale: P(relevant | cosine),
* the fusion weights of the two logits for hybrid search.

Off-topic queries (benchmarks/data/offtopic.jsonl) are gathered too, never fitted on: they show where
``minScore`` separates "nothing relevant" from on-topic hits.

    python benchmarks/calibrate.py --keep /work/bench-data/work --datasets locomo-daily lme-transcripts \
        --providers local --dump /tmp/cal.jsonl
    python benchmarks/calibrate.py --load /tmp/cal.jsonl          # refit from a dump
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality  # noqa: E402

from mdrecall.search import relevance as rel  # noqa: E402
from mdrecall.search.pipeline import SearchPlan, gather  # noqa: E402


def _covers(hit_path: str, start: int, end: int, gold: list[dict[str, Any]]) -> bool:
    for g in gold:
        if g["path"] == hit_path and start <= g.get("endLine", g["line"]) and g["line"] <= end:
            return True
    return False


def collect(args: argparse.Namespace) -> list[dict[str, Any]]:
    paths = quality.Paths(args.bench, args.lme or quality.default_lme_dir(args.bench))
    offtopic = quality.load_queries(quality.OFFTOPIC)
    rows: list[dict[str, Any]] = []
    for dataset in args.datasets:
        queries = quality.sample_queries(dataset, quality.load_queries(paths.queries(dataset)), args.sample)
        by_ws: dict[Path, list[dict[str, Any]]] = defaultdict(list)
        for q in queries:
            by_ws[paths.workspace(dataset, q)].append(q)
        for provider in args.providers:
            mode = "keyword" if provider == "none" else "hybrid"
            config = quality.config_for(dataset, mode, provider, {})
            timings = {"index_s": 0.0, "index_cpu_s": 0.0, "chunks_embedded": 0}
            for ws, items in sorted(by_ws.items()):
                with quality.open_indexed(dataset, ws, config, args.keep, timings) as manager:
                    sel = manager._selection_or_select()
                    prov = sel.provider
                    embed = prov.embed_query if prov is not None else None
                    vfn = manager.vector_search_fn()[0] if prov is not None else None
                    model = getattr(prov, "model", None)
                    asks = [(q, False) for q in items]
                    if args.offtopic_every and items:
                        asks += [({"id": o["id"], "query": o["query"], "as_of": items[0].get("as_of"), "gold": []}, True)
                                 for o in offtopic[:: args.offtopic_every]]
                    for q, is_off in asks:
                        now = datetime.fromisoformat(q["as_of"].replace("Z", "+00:00")) if q.get("as_of") else datetime.now().astimezone()
                        plan = SearchPlan(q["query"], 10, 0.0, manager._scope(None, "main"), now)
                        with manager._read_mutex:
                            found = gather(manager._read_db, manager.config, plan, embed, vfn, [], None, model)
                        for rank, h in enumerate(found.hits[: args.per_query]):
                            ev = h.evidence or rel.KeywordEvidence()
                            rows.append({
                                "dataset": dataset, "provider": provider, "model": model, "id": q["id"],
                                "offtopic": is_off, "rank": rank,
                                "label": int(_covers(h.path, h.start_line, h.end_line, q.get("gold") or [])),
                                "coverage": ev.coverage, "bm25": ev.bm25, "mass": ev.mass,
                                "cosine": h.cosine, "kw_rank": h.keyword_rank, "chars": len(h.text),
                                "known": found.stats.known if found.stats else 0.0,
                                "topical": found.topical,
                                "nterms": len(found.stats.terms) if found.stats else 0,
                            })
            print(f"{dataset} {provider}: {len(rows)} rows", file=sys.stderr, flush=True)
    return rows


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-3, iters: int = 50) -> np.ndarray:
    """Newton-Raphson logistic regression with an intercept (first coefficient) and a small L2."""
    xb = np.hstack([np.ones((x.shape[0], 1)), x])
    w = np.zeros(xb.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-np.clip(xb @ w, -30, 30)))
        g = xb.T @ (p - y) + l2 * np.r_[0, w[1:]]
        h = (xb * (p * (1 - p))[:, None]).T @ xb + l2 * np.eye(len(w))
        step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def logloss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def fit(rows: list[dict[str, Any]]) -> dict[str, Any]:
    on = [r for r in rows if not r["offtopic"]]
    out: dict[str, Any] = {}
    kw = [r for r in on if r["kw_rank"] is not None or r["coverage"] > 0]
    x = np.array([[r["coverage"], r["bm25"], min(r["mass"], 3.0)] for r in kw])
    y = np.array([r["label"] for r in kw], dtype=float)
    w = fit_logistic(x, y)
    out["keyword"] = {"intercept": w[0], "coverage": w[1], "bm25": w[2], "mass": w[3], "n": len(kw), "pos": int(y.sum())}
    for model in sorted({r["model"] for r in on if r["cosine"] is not None}):
        vr = [r for r in on if r["model"] == model and r["cosine"] is not None]
        x = np.array([[r["cosine"]] for r in vr])
        y = np.array([r["label"] for r in vr], dtype=float)
        w = fit_logistic(x, y)
        scale = w[1]
        out[f"vector/{model}"] = {"offset": -w[0] / scale, "scale": scale, "n": len(vr), "pos": int(y.sum())}
        km = rel.KeywordModel(*(out["keyword"][k] for k in ("intercept", "coverage", "bm25", "mass")))
        kl = np.array([rel.keyword_logit(rel.KeywordEvidence(r["coverage"], r["bm25"], r["mass"], (0,)), km) for r in vr])
        vl = scale * (x[:, 0] + w[0] / scale)
        wf = fit_logistic(np.c_[kl, vl], y)
        out[f"fusion/{model}"] = {"intercept": wf[0], "keyword": wf[1], "vector": wf[2], "n": len(vr)}
        p = 1 / (1 + np.exp(-(wf[0] + wf[1] * kl + wf[2] * vl)))
        out[f"fusion/{model}"]["logloss"] = logloss(p, y)
        out[f"fusion/{model}"]["logloss_keyword_only"] = logloss(1 / (1 + np.exp(-kl)), y)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, default=quality.default_bench_dir())
    parser.add_argument("--lme", type=Path, default=None)
    parser.add_argument("--datasets", nargs="+", default=["locomo-daily", "locomo-transcripts"], choices=list(quality.DATASETS))
    parser.add_argument("--providers", nargs="+", default=["none"], help="none (keyword-only), local, e5")
    parser.add_argument("--sample", type=int, default=1)
    parser.add_argument("--per-query", type=int, default=60, help="candidates kept per query")
    parser.add_argument("--offtopic-every", type=int, default=4, help="every N-th off-topic query per workspace (0: none)")
    parser.add_argument("--keep", type=Path, default=Path("/work/bench-data/work"))
    parser.add_argument("--dump", type=Path, default=None)
    parser.add_argument("--load", type=Path, nargs="*", default=None)
    args = parser.parse_args()
    if args.load:
        rows = [json.loads(l) for p in args.load for l in p.read_text().splitlines() if l.strip()]
    else:
        rows = collect(args)
        if args.dump:
            args.dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(json.dumps(fit(rows), indent=2, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
