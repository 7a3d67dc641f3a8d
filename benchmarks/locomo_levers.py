"""What the budget levers give on the LoCoMo dev set: the experiments behind issue 24's "LoCoMo
hybrid ≥ 0.86 needs a reranker" (docs/benchmarks.md, "Why 0.86 is out of reach").

Runs ``benchmarks/quality.py`` in this process with the packing step (``pipeline.pack``) changed as
the options say; nothing here ships. Each option is one lever:

* ``--narrow N``: cite every hit longer than N characters as its best line and ``--context`` lines
  either side (narrowAboveChars N), instead of only hits that do not fit;
* ``--line-cosine W``: choose that line by keyword weight plus W times each line's own embedding
  cosine to the question (the bundled model run on every line of the packed hits);
* ``--trim tail|both``: when the question names a speaker of a chat note, drop the other
  speakers' lines at the end (or both ends) of each hit.

Everything after ``--`` goes to quality.py (``--set query.minScore=0.15`` is the cut-off lever)::

    python benchmarks/locomo_levers.py --narrow 600 --line-cosine 1 -- --keep WORK --datasets locomo-daily \\
        --modes hybrid --offtopic '' --out /tmp/levers.json
    python benchmarks/locomo_levers.py --trim both -- --keep WORK --datasets locomo-daily --modes hybrid --offtopic ''

``--budget-use FILE`` instead reads rows that ``diagnose.py --out FILE`` wrote (LoCoMo daily) and
prints, per category, the mean number of results and characters cited, and the share of searches
whose results fill at least 3,500 of the 4,000 characters.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

_SPEAKER = re.compile(r"^- \[D\d+:\d+\] (\w+):")
_TURN_PREFIX = re.compile(r"^- \[D\d+:\d+\] ")


def budget_use(rows_file: Path, bench: Path) -> None:
    root = bench / "locomo" / "daily" / "workspaces"
    seen: dict[str, tuple[str, int, int]] = {}
    for line in rows_file.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["id"] in seen:
            continue
        ws = root / row["id"].split("/")[1]
        chars = 0
        for path, start, end in row["results"]:
            lines = (ws / path).read_text(encoding="utf-8").split("\n")
            chars += sum(len(text) + 1 for text in lines[start - 1 : end])
        seen[row["id"]] = (row["category"], len(row["results"]), chars)
    by: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for category, results, chars in seen.values():
        by[category].append((results, chars))
    for category, values in sorted(by.items()):
        print(f"{category:12s} n={len(values):4d}  results {statistics.mean(v[0] for v in values):.1f}  "
              f"chars {statistics.mean(v[1] for v in values):.0f}  full (>= 3,500) {sum(v[1] >= 3500 for v in values) / len(values):.2f}")


def install(args: argparse.Namespace) -> None:
    import numpy as np

    from mdrecall.search import pipeline

    asked: dict[str, Any] = {}
    line_vectors: dict[str, Any] = {}
    provider: list[Any] = []

    def vectors(lines: list[str]) -> list[Any]:
        if not provider:
            from mdrecall.embeddings.local import LocalEmbeddingProvider

            provider.append(LocalEmbeddingProvider())
        todo = [line for line in lines if line not in line_vectors]
        if todo:
            texts = [_TURN_PREFIX.sub("", line) or " " for line in todo]
            for line, vector in zip(todo, provider[0].embed_documents(texts), strict=True):
                line_vectors[line] = np.asarray(vector, dtype=np.float32)
        return [line_vectors[line] for line in lines]

    rank = pipeline.rank_candidates

    def ranking(config: Any, plan: Any, *rest: Any, **kw: Any) -> Any:
        asked["query"], asked["vector"] = plan.query, kw.get("query_vec")
        return rank(config, plan, *rest, **kw)

    pack = pipeline.pack

    def packing(hits: list[Any], max_results: int, budget: int, context: int, narrow_above: int, corpus: Any,
                lengths: Any = None, prepare: Any = None) -> Any:
        names = set(re.findall(r"\b[A-Z][a-z]+\b", asked.get("query", "")))
        if args.trim:
            hits = [_trimmed(h, names, args.trim) for h in hits]
        query_vec = asked.get("vector")
        if args.line_cosine and query_vec is not None:
            q = np.asarray(query_vec, dtype=np.float32)
            done: set[int] = set()

            def weigh(hit: Any, inner: Any = prepare) -> None:
                if inner is not None:
                    inner(hit)
                lines = hit.text.split("\n")
                if id(hit) in done or hit.source == "sessions" or len(lines) < 2 or len(hit.line_weights) != len(lines):
                    return
                done.add(id(hit))
                cosines = [float(v @ q) if line.strip() and not line.startswith("#") else 0.0
                           for line, v in zip(lines, vectors(lines), strict=True)]  # fmt: skip
                top = max(hit.line_weights) or 1.0
                hit.line_weights = [w / top + args.line_cosine * max(0.0, c) for w, c in zip(hit.line_weights, cosines, strict=True)]

            prepare = weigh
        return pack(hits, max_results, budget, args.context if args.context >= 0 else context,
                    args.narrow or narrow_above, corpus, lengths, prepare)  # fmt: skip

    pipeline.rank_candidates = ranking  # type: ignore[assignment]
    pipeline.pack = packing  # type: ignore[assignment]


def _trimmed(hit: Any, names: set[str], ends: str) -> Any:
    lines = hit.text.split("\n")
    if hit.source == "sessions" or len(lines) < 2 or hit.text.count("\n") != hit.end_line - hit.start_line:
        return hit
    speakers = [m.group(1) if (m := _SPEAKER.match(line)) else None for line in lines]
    if not any(s in names for s in speakers if s):
        return hit
    lo, hi = 0, len(lines) - 1
    while hi > lo and ((speakers[hi] is not None and speakers[hi] not in names) or not lines[hi].strip()):
        hi -= 1
    if ends == "both":
        while lo < hi and speakers[lo] is not None and speakers[lo] not in names:
            lo += 1
    if (lo, hi) == (0, len(lines) - 1):
        return hit
    weights = hit.line_weights[lo : hi + 1] if len(hit.line_weights) == len(lines) else hit.line_weights
    return replace(hit, start_line=hit.start_line + lo, end_line=hit.start_line + hi, text="\n".join(lines[lo : hi + 1]),
                   line_weights=weights, cost=0)  # fmt: skip


def main() -> int:
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--narrow", type=int, default=0, metavar="N", help="narrowAboveChars for every hit (0: as configured)")
    parser.add_argument("--context", type=int, default=-1, help="contextLines (-1: as configured)")
    parser.add_argument("--line-cosine", type=float, default=0.0, metavar="W", help="weight of each line's own cosine")
    parser.add_argument("--trim", choices=("tail", "both"), default=None)
    parser.add_argument("--budget-use", type=Path, default=None, metavar="FILE", help="diagnose.py --out rows to summarise")
    parser.add_argument("--bench", type=Path, default=None)
    args = parser.parse_args(own)
    import quality

    if args.budget_use is not None:
        budget_use(args.budget_use, args.bench or quality.default_bench_dir())
        return 0
    install(args)
    sys.argv = [sys.argv[0], *rest]
    return int(quality.main())


if __name__ == "__main__":
    raise SystemExit(main())
