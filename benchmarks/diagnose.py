"""Where each gold line of the dev sets is lost: not retrieved, scored below the cut-off, crowded out
of the budget, or retrieved and then cited on the wrong line.

For every query the search's scored candidates are gathered (as benchmarks/calibrate.py does), the
real search runs, and each gold line is put in the first class that holds:

* ``got``: a result cites it;
* ``line``: a result cites a chunk that holds it, but narrowing kept other lines of that chunk;
* ``none``: no candidate chunk holds it (retrieval);
* ``cut``: the best candidate holding it scores below the cut-off;
* ``budget``: it passes the cut-off but another hit took its place (ranking and packing).

    python benchmarks/diagnose.py --keep /work/bench-data/work --datasets lme-transcripts --modes hybrid
    python benchmarks/diagnose.py --keep WORK --datasets locomo-daily --modes keyword --show line

Uses the indexes ``quality.py --keep`` built (same config, same paths); prints counts per dataset,
mode and category, and with ``--show CLASS`` the queries of that class with the cited lines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality
from mdrecall.search.filelines import lengths_for
from mdrecall.search.pipeline import SearchPlan, cut_off, gather
from mdrecall.search.scope import scope_for

CLASSES = ("got", "line", "none", "cut", "budget")


def _holds(path: str, start: int, end: int, gold: dict[str, Any]) -> bool:
    return path == gold["path"] and start <= int(gold["line"]) <= end


def diagnose(args: argparse.Namespace) -> list[dict[str, Any]]:
    paths = quality.Paths(args.bench, args.lme or quality.default_lme_dir(args.bench))
    rows: list[dict[str, Any]] = []
    overrides = quality.parse_overrides(args.set) if args.set else {}
    for dataset in args.datasets:
        queries = quality.sample_queries(dataset, quality.load_queries(paths.queries(dataset)), args.sample)
        if args.workspaces:
            queries = [q for q in queries if q["workspace"] in set(args.workspaces)]
        by_ws: dict[Path, list[dict[str, Any]]] = defaultdict(list)
        for q in queries:
            by_ws[paths.workspace(dataset, q)].append(q)
        for mode in args.modes:
            config = quality.config_for(dataset, mode, "auto", overrides)
            timings = {"index_s": 0.0, "index_cpu_s": 0.0, "chunks_embedded": 0}
            for ws, items in sorted(by_ws.items()):
                with quality.open_indexed(dataset, ws, config, args.keep, timings) as manager:
                    prov = manager.providers.selection.provider
                    embed = prov.embed_query if prov is not None else None
                    model = getattr(prov, "model", None)
                    for q in items:
                        now = datetime.fromisoformat(q["as_of"].replace("Z", "+00:00"))
                        plan = SearchPlan(q["query"], manager.config.query.maxResults, 0.0,
                                          scope_for(manager.config, None, "main"), now,
                                          line_lengths=lengths_for(manager.workspace))  # fmt: skip
                        with manager.index.reading() as db:
                            vfn = manager._vector_search_fn(db)[0] if prov is not None else None
                            found = gather(db, manager.config, plan, embed, vfn, [], None, model)
                        response = manager.search(q["query"], session_key="main", now=now)
                        floor = cut_off(manager.config, found.mode in ("keyword-only", "file-scan"), None)
                        results = [(r.path, r.start_line, r.end_line) for r in response.results]
                        for g in q["gold"]:
                            holders = [(rank, h) for rank, h in enumerate(found.hits) if _holds(h.path, h.start_line, h.end_line, g)]
                            best = holders[0] if holders else None
                            if any(_holds(p, s, e, g) for p, s, e in results):
                                klass = "got"
                            elif any(p == g["path"] and any(h.start_line <= s and e <= h.end_line for _, h in holders)
                                     for p, s, e in results):
                                klass = "line"
                            elif best is None:
                                klass = "none"
                            elif best[1].score < floor:
                                klass = "cut"
                            else:
                                klass = "budget"
                            rows.append({
                                "dataset": dataset, "mode": mode, "id": q["id"], "category": q.get("category"),
                                "query": q["query"], "gold": g, "class": klass,
                                "rank": best[0] if best else None, "score": round(best[1].score, 4) if best else None,
                                "results": results,
                            })
            print(f"{dataset} {mode}: {sum(1 for r in rows if r['dataset'] == dataset and r['mode'] == mode)} gold lines",
                  file=sys.stderr, flush=True)
    return rows


def report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    groups: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    for r in rows:
        groups[(r["dataset"], r["mode"], "all")][r["class"]] += 1
        groups[(r["dataset"], r["mode"], str(r["category"]))][r["class"]] += 1
    for (dataset, mode, cat), counts in sorted(groups.items()):
        table.setdefault(f"{dataset}/{mode}", {})[cat] = {k: counts.get(k, 0) for k in CLASSES}
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, default=quality.default_bench_dir())
    parser.add_argument("--lme", type=Path, default=None)
    parser.add_argument("--keep", type=Path, required=True, help="the work directory quality.py --keep built")
    parser.add_argument("--datasets", nargs="+", default=["locomo-daily"], choices=list(quality.DATASETS))
    parser.add_argument("--modes", nargs="+", default=["hybrid"], choices=list(quality.MODES))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--sample", type=int, default=1)
    parser.add_argument("--workspaces", nargs="+", default=None, help="only these workspaces (LongMemEval question ids)")
    parser.add_argument("--show", default=None, choices=CLASSES, help="print the queries of this class")
    parser.add_argument("--out", type=Path, default=None, help="write every row as JSON lines")
    args = parser.parse_args()
    rows = diagnose(args)
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for key, cats in report(rows).items():
        print(key)
        for cat, counts in cats.items():
            total = sum(counts.values())
            print(f"  {cat:28s} n={total:4d} " + " ".join(f"{k}={v / max(1, total):.2f}" for k, v in counts.items()))
    if args.show:
        for r in rows:
            if r["class"] == args.show:
                print(json.dumps({k: r[k] for k in ("id", "category", "query", "gold", "rank", "score", "results")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
