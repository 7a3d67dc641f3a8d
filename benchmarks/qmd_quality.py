"""What mdrecall adds to QMD's BM25: keyword OR (qmd.keywordMatch "or", the default) against QMD's
own AND semantics ("and"), on LoCoMo (shared/bench, daily-note layout), beside the builtin engine's
keyword-only search. Same index, same questions, defaults otherwise (query.minScore 0.35).

Reports per setting: the share of questions that get no result at all, and the scorer's recall@k
and recall@budget (4,000 characters, the headline; shared/bench/score.py).

    python benchmarks/qmd_quality.py --out benchmarks/results/qmd_quality.json

Results: docs/qmd.md, section "Keyword OR over QMD's AND".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_bench = Path(os.environ.get("MDRECALL_BENCH_DIR", Path(__file__).resolve().parents[1].parent / "shared" / "bench"))
    parser.add_argument("--bench", type=Path, default=default_bench, help="shared/bench (default $MDRECALL_BENCH_DIR or ../shared/bench)")
    parser.add_argument("--layout", default="daily")
    parser.add_argument("--limit", type=int, default=0, help="questions per workspace (0: all)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    from mdrecall import open_manager

    root = args.bench / "locomo" / args.layout
    queries = [json.loads(line) for line in (root / "queries.jsonl").read_text().splitlines() if line.strip()]
    by_ws: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in queries:
        if not args.limit or len(by_ws[q["workspace"]]) < args.limit:
            by_ws[q["workspace"]].append(q)
    settings = {"qmd-or": {"backend": "qmd", "qmd": {"keywordMatch": "or"}},
                "qmd-and": {"backend": "qmd", "qmd": {"keywordMatch": "and"}},
                "qmd-or-minScore0": {"backend": "qmd", "qmd": {"keywordMatch": "or"}, "query": {"minScore": 0}},
                "builtin-keyword": {"backend": "builtin"}}
    report: dict[str, Any] = {"set": f"locomo/{args.layout}", "queries": sum(map(len, by_ws.values())), "settings": {}}
    with tempfile.TemporaryDirectory(prefix="mdrecall-qmd-quality-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ["MDRECALL_HOME"] = str(tmp / "home")
        lines: dict[str, list[str]] = defaultdict(list)
        empty: dict[str, int] = defaultdict(int)
        for ws_name, items in sorted(by_ws.items()):
            workspace = root / "workspaces" / ws_name
            sources = ["memory", "sessions"] if args.layout == "transcripts" else ["memory"]
            for name, extra in settings.items():
                config = {"provider": "none", "sources": sources, "sync": {"watch": False},
                          "store": {"path": str(tmp / f"{ws_name}-{name}.sqlite")}, **extra}
                if extra["backend"] == "qmd":
                    config["qmd"] = {**extra["qmd"], "indexDir": str(tmp / f"{ws_name}-qmd"), "warmFallback": False}
                manager = open_manager(workspace, config, use_global_config=False)
                try:
                    if hasattr(manager, "wait_warm"):
                        manager.wait_warm(600)
                    manager.sync()
                    for q in items:
                        response = manager.search(q["query"])
                        if extra["backend"] == "qmd" and response.provider != "qmd":
                            raise SystemExit(f"QMD did not answer {q['id']}: {response.warnings}")
                        empty[name] += not response.results
                        lines[name].append(json.dumps({"id": q["id"], "results": [
                            {"path": r.path, "startLine": r.start_line, "endLine": r.end_line, "score": r.score} for r in response.results]}))
                finally:
                    manager.close()
            print(f"{ws_name}: done", file=sys.stderr, flush=True)
        query_file = tmp / "queries.jsonl"
        query_file.write_text("".join(json.dumps(q) + "\n" for items in by_ws.values() for q in items))
        for name in settings:
            results = tmp / f"{name}.jsonl"
            results.write_text("\n".join(lines[name]) + "\n")
            scored = subprocess.run([sys.executable, str(args.bench / "score.py"), str(query_file), str(results),
                                     "--budget-chars", "4000", "--root", str(root / "workspaces")],
                                    capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            summary = json.loads(scored)
            report["settings"][name] = {"no_result_share": round(empty[name] / report["queries"], 3), "score": summary}
            print(name, json.dumps(report["settings"][name])[:400], flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
