"""Knowledge updates: does the newest statement of a fact rank above the one it superseded?

On the knowledge-update questions of the LongMemEval dev split (10 questions, both layouts) every
question has two evidence statements of one fact made at different times (the source's evidence
sessions and their dates: ``manifest.jsonl`` next to the built layouts). Each question is asked as
of its date with supersession on and off, on the same index in the same process; a question
counts as "newer first" when the first result covering the newer gold line ranks above the first
covering the older one (or the older one is not returned at all while the newer is).

Also reported: how often the older statement came back marked ``supersededBy`` the newer one;
the questions where both statements came back; the questions that ask for the current value apart
from those asking for an earlier one ("initially", "first", "earlier", "before": there the older
statement is the answer, and supersession must not hide it); and the same questions asked
``asOf`` their date (only what was known then).

    taskset -c 0 nice -n 5 env MDRECALL_THREADS=1 \\
        python benchmarks/supersession.py --modes keyword hybrid --out benchmarks/results/supersession.json

Precision is measured in the same run where facts do not change: every LoCoMo question (both
layouts) asked with supersession off and on; a result marked there counts as a wrong mark
(``--precision``; the marked statements are listed).

Our own cases (not benchmark data) are in tests/search/test_supersession.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mdrecall.cli import parse_overrides
from quality import ROOT, Paths, config_for, default_bench_dir, default_lme_dir, load_queries, open_indexed

LAYOUTS = {"lme-daily": "daily", "lme-transcripts": "transcripts"}
_EARLIER = re.compile(r"\b(?:initially|first|earlier|before)\b", re.IGNORECASE)
_SESSION_HEADING = re.compile(r"^## Session (\d+) · (\d{4})/(\d{2})/(\d{2}) \(\w+\) (\d{2}):(\d{2})")


def _manifest(lme: Path) -> dict[str, dict[int, datetime]]:
    """question id -> session number -> the session's date, from the source records' dates."""
    out: dict[str, dict[int, datetime]] = {}
    for line in (lme / "manifest.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        out[record["question_id"]] = {
            s["n"]: datetime.strptime(s["date"].split(" (")[0] + " " + s["date"].rsplit(" ", 1)[1], "%Y/%m/%d %H:%M")
            for s in record["sessions"]
        }
    return out


def _session_of(layout: str, ws: Path, gold: dict[str, Any]) -> int:
    """Which source session a gold line belongs to."""
    if layout == "transcripts":
        match = re.search(r"session_(\d+)\.jsonl$", gold["path"])
        assert match, gold
        return int(match.group(1))
    lines = (ws / gold["path"]).read_text(encoding="utf-8").split("\n")
    for i in range(gold["line"] - 1, -1, -1):
        match = _SESSION_HEADING.match(lines[i])
        if match:
            return int(match.group(1))
    raise ValueError(f"no session heading above {gold}")


def _rank(results: list[Any], gold: dict[str, Any]) -> int | None:
    for i, hit in enumerate(results, 1):
        if hit.path == gold["path"] and hit.start_line <= gold["line"] <= hit.end_line:
            return i
    return None


def _covers(hit: Any, gold: dict[str, Any]) -> bool:
    return bool(hit.path == gold["path"] and hit.start_line <= gold["line"] <= hit.end_line)


def _newer_first(newer: int | None, older: int | None) -> bool:
    return newer is not None and (older is None or newer < older)


def run(dataset: str, mode: str, paths: Paths, tmp: Path, lme: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    layout = LAYOUTS[dataset]
    dates = _manifest(lme)
    queries = [q for q in load_queries(paths.queries(dataset)) if q["category"] == "knowledge-update"]
    config = config_for(dataset, mode, "auto", overrides)
    timings = {"index_s": 0.0, "index_cpu_s": 0.0, "chunks_embedded": 0}
    rows = []
    cpu: dict[str, float] = {"off": 0.0, "on": 0.0, "on_as_of": 0.0}
    for q in queries:
        ws = paths.workspace(dataset, q)
        sessions = dates[q["workspace"]]
        golds = sorted(q["gold"], key=lambda g: (sessions[_session_of(layout, ws, g)], g["path"], g["line"]))
        older, newer = golds[0], golds[-1]
        row: dict[str, Any] = {"id": q["id"], "query": q["query"], "older": older, "newer": newer,
                               "asks": "earlier" if _EARLIER.search(q["query"]) else "current"}
        now = datetime.fromisoformat(q["as_of"].replace("Z", "+00:00"))
        with open_indexed(dataset, ws, config, tmp, timings) as manager:
            for label, enabled, as_of in (("off", False, False), ("on", True, False), ("on_as_of", True, True)):
                manager.config.query.supersession.enabled = enabled
                kwargs: dict[str, Any] = {"as_of": now} if as_of else {}
                try:
                    c0 = time.process_time()
                    response = manager.search(q["query"], session_key="main", now=now, **kwargs)
                    cpu[label] += time.process_time() - c0
                except TypeError:  # a build without as-of search
                    continue
                results = list(response.results)
                r_new, r_old = _rank(results, newer), _rank(results, older)
                marked = any(_covers(h, older) and (getattr(h, "superseded_by", None) or "").startswith(newer["path"])
                             for h in results)  # fmt: skip
                row[label] = {"newer_rank": r_new, "older_rank": r_old, "newer_first": _newer_first(r_new, r_old),
                              "older_marked_superseded": marked}  # fmt: skip
            manager.config.query.supersession.enabled = True
        rows.append(row)
        print(f"{dataset}/{mode} {q['id']}: " + "  ".join(
            f"{k} new={row[k]['newer_rank']} old={row[k]['older_rank']}" for k in ("off", "on", "on_as_of") if k in row),
            flush=True)  # fmt: skip

    def summary(label: str) -> dict[str, Any]:
        got = [r[label] for r in rows if label in r]
        if not got:
            return {}
        both = [g for g in got if g["newer_rank"] is not None and g["older_rank"] is not None]
        current = [r[label] for r in rows if label in r and r["asks"] == "current"]
        earlier = [r[label] for r in rows if label in r and r["asks"] == "earlier"]
        return {
            "questions": len(got),
            "newer_first": sum(g["newer_first"] for g in got),
            "newer_first_rate": round(sum(g["newer_first"] for g in got) / len(got), 3),
            "both_returned": len(both),
            "both_returned_newer_first": sum(g["newer_first"] for g in both),
            "newer_returned": sum(g["newer_rank"] is not None for g in got),
            "older_returned": sum(g["older_rank"] is not None for g in got),
            "older_marked_superseded": sum(g["older_marked_superseded"] for g in got),
            "asking_current": len(current),
            "asking_current_newer_first": sum(g["newer_first"] for g in current),
            "asking_earlier": len(earlier),
            "asking_earlier_older_returned": sum(g["older_rank"] is not None for g in earlier),
        }

    return {"off": summary("off"), "on": summary("on"), "on_as_of": summary("on_as_of"), "questions": rows,
            "index_s": round(timings["index_s"], 2),
            "cpu_ms_per_search": {k: round(1000 * v / max(1, len(rows)), 2) for k, v in cpu.items()}}  # fmt: skip


PRECISION_SETS = ("locomo-daily", "locomo-transcripts")


def precision(dataset: str, mode: str, paths: Paths, tmp: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """Marks where facts do not change: every LoCoMo question asked with supersession off and on (same
    index, same process). LoCoMo's conversations tell what happened, they do not revise facts, so a
    result marked ``supersededBy`` there is counted as a wrong mark (an upper bound: a few may be
    real changes of mind); the marked statements are listed for a reader to judge."""
    queries = load_queries(paths.queries(dataset))
    by_ws: dict[Path, list[dict[str, Any]]] = {}
    for q in queries:
        by_ws.setdefault(paths.workspace(dataset, q), []).append(q)
    config = config_for(dataset, mode, "auto", overrides)
    timings = {"index_s": 0.0, "index_cpu_s": 0.0, "chunks_embedded": 0}
    counts = {"off": {"results": 0, "marked": 0, "queries_marked": 0}, "on": {"results": 0, "marked": 0, "queries_marked": 0,
              "possibly": 0, "moved": 0}}  # fmt: skip
    marked: list[dict[str, Any]] = []
    for ws, items in sorted(by_ws.items()):
        with open_indexed(dataset, ws, config, tmp, timings) as manager:
            for q in items:
                now = datetime.fromisoformat(q["as_of"].replace("Z", "+00:00"))
                for label, enabled in (("off", False), ("on", True)):
                    manager.config.query.supersession.enabled = enabled
                    results = list(manager.search(q["query"], session_key="main", now=now).results)
                    c = counts[label]
                    c["results"] += len(results)
                    hit = [r for r in results if r.superseded_by]
                    c["marked"] += len(hit)
                    c["queries_marked"] += bool(hit)
                    if label == "on":
                        notes = [(r.explanation or {}).get("supersession") or {} for r in results]
                        c["possibly"] += sum("possiblyRestatedBy" in n for n in notes)
                        c["moved"] += sum("moved" in n for n in notes)
                        marked += [{"id": q["id"], "query": q["query"], "citation": r.citation, "supersededBy": r.superseded_by,
                                    "why": ((r.explanation or {}).get("supersession") or {}).get("why")} for r in hit]
            manager.config.query.supersession.enabled = True
    for c in counts.values():
        c["per_1000_results"] = round(1000 * c["marked"] / max(1, c["results"]), 3)
    return {"questions": len(queries), **counts, "marked_statements": marked}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, default=default_bench_dir())
    parser.add_argument("--lme", type=Path, default=None, help="folder the LongMemEval dev split was built into")
    parser.add_argument("--datasets", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS))
    parser.add_argument("--precision", nargs="*", default=list(PRECISION_SETS), choices=list(PRECISION_SETS),
                        help="where facts do not change: count the marks (none: skip)")
    parser.add_argument("--modes", nargs="+", default=["keyword"], choices=["keyword", "hybrid"])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--keep", type=Path, default=None, help="work directory to keep (indexes)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "supersession.json")
    args = parser.parse_args()
    lme = args.lme or default_lme_dir(args.bench)
    paths = Paths(args.bench, lme)
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="mdrecall-supersession-"))
    tmp.mkdir(parents=True, exist_ok=True)
    env = " ".join(f"{k}={os.environ[k]}" for k in ("MDRECALL_BENCH_DIR", "MDRECALL_LME_DIR", "MDRECALL_THREADS") if k in os.environ)
    report: dict[str, Any] = {"command": f"{env} python {' '.join(sys.argv)}".strip(), "results": {}}
    t0 = time.perf_counter()
    for dataset in args.datasets:
        for mode in args.modes:
            found = run(dataset, mode, paths, tmp, lme, parse_overrides(args.set))
            report["results"][f"{dataset}/{mode}"] = found
            print(f"{dataset}/{mode}: off {found['off']}\n    on {found['on']}\n    asOf {found['on_as_of']}", flush=True)
    for dataset in args.precision:
        for mode in args.modes:
            found = precision(dataset, mode, paths, tmp, parse_overrides(args.set))
            report["results"][f"precision/{dataset}/{mode}"] = found
            print(f"precision {dataset}/{mode}: off {found['off']} on {found['on']}", flush=True)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
