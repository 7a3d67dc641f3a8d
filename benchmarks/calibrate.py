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
    python benchmarks/calibrate.py --load /tmp/cal.jsonl --offtopic-by-size   # off-topic vs memory size
"""

from __future__ import annotations

import argparse
import os

# One BLAS/OpenMP thread per process: NumPy's BLAS threads spin against each other (and against
# other work) on a loaded machine; a MiniLM query embedding measured 12 ms alone and 4 s under load
# with the default thread pool, 20 ms with one thread.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import json
import math
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality
from mdrecall.search import relevance as rel
from mdrecall.search.filelines import lengths_for
from mdrecall.search.pipeline import SearchPlan, gather
from mdrecall.search.scope import scope_for


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
                    prov = manager.providers.selection.provider
                    embed = prov.embed_query if prov is not None else None
                    model = getattr(prov, "model", None)
                    asks = [(q, False) for q in items]
                    if args.offtopic_every and items:
                        asks += [({"id": o["id"], "query": o["query"], "as_of": items[0].get("as_of"), "gold": []}, True)
                                 for o in offtopic[:: args.offtopic_every]]
                    for q, is_off in asks:
                        now = datetime.fromisoformat(q["as_of"].replace("Z", "+00:00")) if q.get("as_of") else datetime.now().astimezone()
                        plan = SearchPlan(q["query"], 10, 0.0, scope_for(manager.config, None, "main"), now,
                                          line_lengths=lengths_for(manager.workspace))  # fmt: skip
                        with manager.index.reading() as db:
                            vfn = manager._vector_search_fn(db)[0] if prov is not None else None
                            found = gather(db, manager.config, plan, embed, vfn, [], None, model)
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
                                "asked": found.speaker.kind if found.speaker else None, "other_speaker": int(h.other_speaker),
                            })
            print(f"{dataset} {provider}: {len(rows)} rows", file=sys.stderr, flush=True)
    return rows


def fit_logistic(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None, l2: float = 1e-3,
                 iters: int = 100) -> np.ndarray:
    """Newton-Raphson logistic regression with an intercept (first coefficient) and a small L2."""
    xb = np.hstack([np.ones((x.shape[0], 1)), x])
    wts = np.ones(len(y)) if weights is None else weights
    w = np.zeros(xb.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-np.clip(xb @ w, -30, 30)))
        g = xb.T @ (wts * (p - y)) + l2 * np.r_[0, w[1:]]
        h = (xb * (wts * p * (1 - p))[:, None]).T @ xb + l2 * np.eye(len(w))
        step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def _offtopic_id(row: dict[str, Any]) -> int:
    return int(str(row["id"]).rsplit("/", 1)[-1])


def _fits_on(row: dict[str, Any]) -> bool:
    """On-topic rows, and the off-topic questions with id ≡ 1 (mod 4); id ≡ 3 (mod 4) only measures."""
    return not row["offtopic"] or _offtopic_id(row) % 4 == 1


def _measured(row: dict[str, Any]) -> bool:
    return row["offtopic"] and _offtopic_id(row) % 4 == 3


def kfeat(r: dict[str, Any]) -> list[float]:
    return [r["coverage"], r["bm25"], min(r["mass"], 3.0), r.get("known", 1.0)]


def vfeat(r: dict[str, Any]) -> list[float]:
    return [r["cosine"], r.get("topical") or 0.0]


def groups(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Rows of one search each (rows are written per search, rank 0 first)."""
    out: list[list[dict[str, Any]]] = []
    for r in rows:
        if r["rank"] == 0 or not out:
            out.append([])
        out[-1].append(r)
    return out


def separation(rows: list[dict[str, Any]], logit, thresholds: list[float]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Per threshold on P: share of measured off-topic searches left empty, share of on-topic gold
    hits in the top 10 kept."""
    off, gold = [], []
    for g in groups(rows):
        ps = sorted(((1 / (1 + math.exp(-logit(r))), r["label"]) for r in g), reverse=True)
        if g[0]["offtopic"]:
            if _measured(g[0]):
                off.append(ps[0][0] if ps else 0.0)
        else:
            gold += [p for p, label in ps[:10] if label]
    return {
        str(t): {"offtopic_empty": round(float(np.mean([o < t for o in off])), 3) if off else None,
                 "gold_kept": round(float(np.mean([x >= t for x in gold])), 3) if gold else None}
        for t in thresholds
    } | {"n_offtopic": len(off), "n_gold": len(gold)}


THRESHOLDS = [0.002, 0.005, 0.01, 0.02, 0.03, 0.05]


def fit(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    kw = [r for r in rows if r["provider"] == "none" and _fits_on(r)]
    wk = fit_logistic(np.array([kfeat(r) for r in kw]), np.array([r["label"] for r in kw], float))
    out["keyword"] = {"intercept": wk[0], "coverage": wk[1], "bm25": wk[2], "mass": wk[3], "known": wk[4], "n": len(kw)}

    def klogit(r: dict[str, Any]) -> float:
        return float(wk[0] + np.dot(wk[1:], kfeat(r)))

    for ds in sorted({r["dataset"] for r in rows}):
        sub = [r for r in rows if r["provider"] == "none" and r["dataset"] == ds]
        out[f"separation/keyword/{ds}"] = separation(sub, klogit, THRESHOLDS)
    hybrid = [r for r in rows if r["provider"] != "none" and r["cosine"] is not None]
    vmodels: dict[str, np.ndarray] = {}
    for model in sorted({r["model"] for r in hybrid}):
        vr = [r for r in hybrid if r["model"] == model and _fits_on(r)]
        wv = fit_logistic(np.array([vfeat(r) for r in vr]), np.array([r["label"] for r in vr], float))
        vmodels[model] = wv
        out[f"vector/{model}"] = {"intercept": wv[0], "cosine": wv[1], "topical": wv[2], "n": len(vr)}
    if hybrid:
        train = [r for r in hybrid if _fits_on(r)]

        def vlogit(r: dict[str, Any]) -> float:
            w = vmodels[r["model"]]
            return float(w[0] + np.dot(w[1:], vfeat(r)))

        wf = fit_logistic(np.array([[klogit(r), vlogit(r)] for r in train]), np.array([r["label"] for r in train], float))
        out["fusion"] = {"intercept": wf[0], "keyword": wf[1], "vector": wf[2], "n": len(train)}
        for model in sorted(vmodels):
            for ds in sorted({r["dataset"] for r in hybrid if r["model"] == model}):
                sub = [r for r in hybrid if r["model"] == model and r["dataset"] == ds]
                out[f"separation/hybrid/{model}/{ds}"] = separation(
                    sub, lambda r: wf[0] + wf[1] * klogit(r) + wf[2] * vlogit(r), THRESHOLDS)
                out[f"separation/vector/{model}/{ds}"] = separation(sub, vlogit, THRESHOLDS)
    out["speaker"] = fit_speaker(rows)
    return out


def fit_speaker(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The logit offset of a hit stating another speaker's words (search/speaker.py): a logistic
    regression of the label on the shipped logit and that indicator, over on-topic questions that ask
    about one speaker (by role, or by name); the offset is the indicator's weight in units of the
    logit's own."""
    out: dict[str, Any] = {}
    for name, provider in (("keyword", lambda r: r["provider"] == "none"), ("hybrid", lambda r: r["provider"] != "none")):
        for kind in ("role", "name"):
            asked = [r for r in rows if provider(r) and not r["offtopic"] and r.get("asked") == kind]
            if not asked or not any(r["other_speaker"] for r in asked):
                continue
            w = fit_logistic(np.array([[shipped_logit(r), r["other_speaker"]] for r in asked]),
                             np.array([r["label"] for r in asked], float))  # fmt: skip
            other = [r for r in asked if r["other_speaker"]]
            out[f"{name}/{kind}"] = {
                "offset": round(float(w[2] / w[1]), 3), "logit_weight": round(float(w[1]), 3), "n": len(asked),
                "n_other": len(other), "gold_other": sum(r["label"] for r in other),
                "gold_same": sum(r["label"] for r in asked if not r["other_speaker"]),
            }
    return out


def shipped_logit(r: dict[str, Any]) -> float:
    """A candidate's hybrid logit under the coefficients in relevance.py (no date boost)."""
    k = rel.keyword_logit(rel.KeywordEvidence(coverage=r["coverage"], bm25=r["bm25"], mass=r["mass"],
                                              known=r.get("known", 1.0)))  # fmt: skip
    if r["cosine"] is None:
        return k
    v = rel.vector_logit(r["cosine"], rel.vector_model(r["model"]), r.get("topical"))
    return rel.fused_logit(k, v)


def offtopic_by_size(rows: list[dict[str, Any]], fractions: tuple[float, ...] = (1.0, 0.5, 0.3, 0.1),
                     seed: int = 0) -> dict[str, Any]:
    """Share of off-topic searches left empty (best hybrid hit below minScore's probability) when
    each memory keeps only a random fraction of its chunks: the candidates of the fraction are a
    random share of the gathered ones, so how much of the "not empty" is the memory's size alone."""
    rng = np.random.default_rng(seed)
    pivot = rel.SCALE.pivot
    out: dict[str, Any] = {}
    hybrid = [r for r in rows if r["provider"] != "none"]
    for ds in sorted({r["dataset"] for r in hybrid}):
        searches = [np.array([shipped_logit(r) for r in g]) for g in groups([r for r in hybrid if r["dataset"] == ds])
                    if g[0]["offtopic"]]  # fmt: skip
        out[ds] = {str(f): round(float(np.mean([
            (lambda kept: kept.max() if len(kept) else -12.0)(logits[rng.random(len(logits)) < f]) < pivot
            for logits in searches])), 3) for f in fractions} | {"searches": len(searches)}  # fmt: skip
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, default=quality.default_bench_dir())
    parser.add_argument("--lme", type=Path, default=None)
    parser.add_argument("--datasets", nargs="+", default=["locomo-daily", "locomo-transcripts"], choices=list(quality.DATASETS))
    parser.add_argument("--providers", nargs="+", default=["none"], help="none (keyword-only), local, e5")
    parser.add_argument("--sample", type=int, default=1)
    parser.add_argument("--max-workspaces", type=int, default=0)
    parser.add_argument("--per-query", type=int, default=60, help="candidates kept per query")
    parser.add_argument("--offtopic-every", type=int, default=4, help="every N-th off-topic query per workspace (0: none)")
    parser.add_argument("--keep", type=Path, default=Path("/work/bench-data/work"))
    parser.add_argument("--dump", type=Path, default=None)
    parser.add_argument("--load", type=Path, nargs="*", default=None)
    parser.add_argument("--offtopic-by-size", action="store_true",
                        help="report off-topic emptiness on random fractions of each memory instead of fitting")
    args = parser.parse_args()
    quality.MAX_WORKSPACES = args.max_workspaces
    if args.load:
        rows = [json.loads(l) for p in args.load for l in p.read_text().splitlines() if l.strip()]
    else:
        rows = collect(args)
        if args.dump:
            args.dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(json.dumps(offtopic_by_size(rows) if args.offtopic_by_size else fit(rows), indent=2, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
