"""What redacting Markdown costs per MB (CPU time, this process), on real notes and on a worst case.

    python benchmarks/redaction.py [DIR ...]

For each directory (default: the bundled example workspace) every ``*.md`` below it is redacted
with ``redact_markdown`` as the indexer does; "worst case" is generated text in which every line
names a key ("token", "secret", "password", "key") and has a separator, so the slowest rule runs on
every line. Results and their reading: docs/reliability.md, section "Figures".
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from mdrecall.sources.redact import redact_markdown

ROOT = Path(__file__).resolve().parents[1]


def measure(texts: list[str], repeats: int = 5) -> dict[str, float]:
    size = sum(len(t.encode("utf-8")) for t in texts)
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for text in texts:
            redact_markdown(text)
        best = min(best, time.process_time() - start)
    return {"files": len(texts), "mb": round(size / 1e6, 3), "cpu_ms_per_mb": round(best * 1000 / (size / 1e6), 1)}


def worst_case(files: int = 200, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    words = "the staging database kestrel cluster deploy release budget meeting decided review runbook".split()
    hot = ["token", "secret", "password", "api key", "monkey"]
    return ["\n".join(f"- {rng.choice(hot)}: " + " ".join(rng.choice(words) for _ in range(14)) for _ in range(25)) + "\n"
            for _ in range(files)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="*", default=[str(ROOT / "examples" / "workspace")])
    args = parser.parse_args()
    results = {d: measure([p.read_text(encoding="utf-8", errors="replace") for p in sorted(Path(d).rglob("*.md"))])
               for d in args.dirs}
    results["worst case (a key and a separator on every line)"] = measure(worst_case())
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
