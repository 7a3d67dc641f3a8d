"""Calibrate the LanceDB backend's two cutoffs on the cosine scale of an embedding model.

The LanceDB backend scores a memory by the cosine similarity of unit vectors (``1 - cosine
distance``). Two decisions sit on that scale:

* the **duplicate check** (``lancedb.duplicateThreshold``): a new memory whose nearest stored
  neighbour scores at or above it is not stored again;
* the **auto-recall cutoff** (``lancedb.recallMinScore``): a stored memory is injected into a prompt
  only when it scores at or above it.

This script measures, with a real model (the bundled all-MiniLM-L6-v2 by default), the score
distributions those cutoffs must separate, on a hand-written set (below; no benchmark data):

* ``dup``: a memory against a re-statement of it (same fact, other words, case, punctuation);
* ``related``: a memory against a *different* memory on the same topic (must both be kept);
* ``update``: a memory against a changed version of it ("light mode now", another date): must be
  stored too, so the newer statement is there to be recalled;
* ``relevant``: a prompt against the memory that should be recalled for it (best match);
* ``off_topic``: a prompt about something else against its best-scoring memory.

and prints, for each candidate cutoff, how many pairs land on each side, the cutoff with the
fewest errors, and the lowest cutoff with no false alarm (no distinct memory merged as a duplicate;
no off-topic prompt given a block), which is how the defaults were chosen::

    python benchmarks/ltm_calibration.py                  # bundled local model
    python benchmarks/ltm_calibration.py --provider openai # any provider in mdrecall's registry
    python benchmarks/ltm_calibration.py --json out.json

Results and how the defaults were chosen: docs/lancedb.md, "Scores and cutoffs".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

# Each topic: memories (first one is the target), re-statements of the first, prompts that should
# recall the first, and (some topics) updates: a changed version of the first that must be stored too.
TOPICS: list[dict[str, list[str]]] = [
    {
        "memories": ["I prefer dark mode in every editor and terminal.", "My terminal font is JetBrains Mono at 13 pt."],
        "dups": ["I prefer dark mode in all editors and terminals", "i prefer DARK MODE in every editor and terminal!"],
        "prompts": ["Set up the colour theme for my new IDE.", "Which theme should the terminal use?"],
        "updates": ["I prefer light mode in every editor and terminal now.", "I no longer like dark mode in editors."],
    },
    {
        "memories": ["We decided to use PostgreSQL 16 for the billing service.", "The billing service runs on Kubernetes in eu-west-1."],
        "dups": ["We have decided to use PostgreSQL 16 for the billing service.", "Decision: the billing service will use PostgreSQL 16."],
        "prompts": ["Which database does billing use?", "Write the migration script for the billing database."],
        "updates": ["We decided to use MySQL 8 for the billing service.", "We decided to move billing from PostgreSQL 16 to PostgreSQL 17."],
    },
    {
        "memories": ["My daughter Mia is allergic to peanuts.", "Mia's school is Greenfield Primary."],
        "dups": ["My daughter Mia has a peanut allergy.", "my daughter mia is allergic to peanuts"],
        "prompts": ["Suggest a snack I can pack for Mia.", "Plan a birthday cake recipe for my daughter."],
    },
    {
        "memories": ["I always want commit messages in the imperative mood.", "I use conventional commit prefixes like feat and fix."],
        "dups": ["Commit messages should always be written in the imperative mood.", "I always want commit messages in imperative mood"],
        "prompts": ["Write the commit message for this change.", "How should I phrase the git commit?"],
    },
    {
        "memories": ["I hate being called before 9 am; send a message instead.", "My working hours are 9 to 17 Central European Time."],
        "dups": ["I hate getting calls before 9 am, message me instead.", "I hate being called before 9am; send a message instead"],
        "prompts": ["Should I phone the user at 7:30 tomorrow morning?", "When is a good time to call me?"],
    },
    {
        "memories": ["Our team decided to release every second Thursday.", "Releases are tagged as vYYYY.MM.DD."],
        "dups": ["The team decided to ship a release every other Thursday.", "Our team decided to release every second thursday"],
        "prompts": ["When is the next release day?", "Plan the release calendar for this quarter."],
        "updates": ["Our team decided to release every Tuesday instead.", "Our team decided to release every second Thursday, except in August."],
    },
    {
        "memories": ["I am vegetarian and do not eat fish.", "I like spicy Thai food."],
        "dups": ["I'm a vegetarian and I don't eat fish.", "I am vegetarian and don't eat fish either."],
        "prompts": ["Book a restaurant for dinner with me on Friday.", "Suggest a recipe for tonight."],
    },
    {
        "memories": ["My manager is Priya Raman, she leads the platform team.", "Priya prefers written status updates on Mondays."],
        "dups": ["Priya Raman is my manager and leads the platform team.", "my manager is priya raman, she leads the platform team"],
        "prompts": ["Who is my manager?", "Draft an email to my boss about the outage."],
    },
    {
        "memories": ["I want all Python code formatted with black and typed with mypy strict.", "I use Python 3.12 for new projects."],
        "dups": ["All Python code should be formatted with black and type-checked with mypy strict.", "I want all python code formatted with Black and typed with mypy --strict"],
        "prompts": ["Set up linting for the new Python repository.", "Which formatter should this Python project use?"],
    },
    {
        "memories": ["We will use Terraform, not Pulumi, for infrastructure.", "Terraform state lives in the ops-state S3 bucket."],
        "dups": ["We're going to use Terraform rather than Pulumi for infrastructure.", "We will use terraform, not pulumi, for infra."],
        "prompts": ["Write infrastructure code for the new VPC.", "Which infrastructure-as-code tool do we use?"],
    },
    {
        "memories": ["I prefer answers in short bullet points, no long paragraphs.", "Please answer me in English even when I write German."],
        "dups": ["I prefer short bullet-point answers rather than long paragraphs.", "I prefer answers in short bullet points; no long paragraphs"],
        "prompts": ["Explain how DNS works.", "Summarise this article for me."],
    },
    {
        "memories": ["My flight to Lisbon leaves on 14 May from gate B12.", "I always book an aisle seat."],
        "dups": ["My Lisbon flight departs on 14 May from gate B12.", "my flight to lisbon leaves on 14 may from gate b12"],
        "prompts": ["When do I fly to Lisbon?", "Remind me of my travel plans for May."],
        "updates": ["My flight to Lisbon was moved to 16 May, gate C3.", "My flight to Porto leaves on 14 May from gate B12."],
    },
    {
        "memories": ["我喜欢用深色主题。", "我的猫叫小白。"],
        "dups": ["我喜欢深色主题。", "我喜欢用深色的主题"],
        "prompts": ["帮我设置编辑器的主题。", "我应该用什么颜色主题？"],
    },
    {
        "memories": ["The staging database password rotates every 30 days.", "Staging runs on db-stage-2."],
        "dups": ["The password of the staging database is rotated every 30 days.", "the staging database password rotates every 30 days"],
        "prompts": ["How often does the staging DB password change?", "Why did my staging database login stop working?"],
    },
]

OFF_TOPIC_PROMPTS = [
    "What is the capital of Australia?",
    "Translate 'good morning' into Spanish.",
    "How many moons does Jupiter have?",
    "Write a haiku about autumn leaves.",
    "What is 17 times 23?",
    "Explain the rules of chess castling.",
    "Who painted the Mona Lisa?",
    "How do volcanoes form?",
    "Give me a fun fact about octopuses.",
    "What does HTTP status 418 mean?",
    "Recommend a classic science fiction novel.",
    "How long should I boil an egg?",
    "What year did the Berlin Wall fall?",
    "Convert 100 Fahrenheit to Celsius.",
    "Tell me a joke about penguins.",
    "What is the tallest mountain in Africa?",
    "Hello, how are you today?",
    "Thanks, that's all for now.",
    "什么是光合作用？",
    "Explain quantum entanglement simply.",
]


def unit(vectors: list[list[float]]) -> np.ndarray:
    m = np.asarray(vectors, dtype=np.float32)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def measure(provider: object) -> dict[str, list[float]]:
    from mdrecall.backends.lancedb.manager import language_ok

    memories = [m for t in TOPICS for m in t["memories"]]
    mem_vecs = unit(provider.embed_documents(memories))  # type: ignore[attr-defined]
    index = {m: i for i, m in enumerate(memories)}
    out: dict[str, list[float]] = {"dup": [], "related": [], "relevant": [], "relevant_rank1": [], "off_topic": [], "update": []}
    for topic in TOPICS:
        target = mem_vecs[index[topic["memories"][0]]]
        dup_vecs = unit(provider.embed_documents(topic["dups"]))  # type: ignore[attr-defined]
        out["dup"].extend(float(v @ target) for v in dup_vecs)
        for other in topic["memories"][1:]:
            out["related"].append(float(mem_vecs[index[other]] @ target))
        if topic.get("updates"):
            upd = unit(provider.embed_documents(topic["updates"]))  # type: ignore[attr-defined]
            out["update"].extend(float(v @ target) for v in upd)
        for prompt in topic["prompts"]:
            q = unit([provider.embed_query(prompt)])[0]  # type: ignore[attr-defined]
            scores = mem_vecs @ q
            # As the backend scores: a match a model cannot read (CJK for MiniLM) needs a shared term.
            scores = np.where([language_ok(provider, prompt, m) for m in memories], scores, 0.0)
            out["relevant"].append(float(scores[index[topic["memories"][0]]]))
            out["relevant_rank1"].append(float(np.argmax(scores) == index[topic["memories"][0]]))
    for prompt in OFF_TOPIC_PROMPTS:
        q = unit([provider.embed_query(prompt)])[0]  # type: ignore[attr-defined]
        raw = mem_vecs @ q
        out.setdefault("off_topic_raw", []).append(float(np.max(raw)))
        scores = np.where([language_ok(provider, prompt, m) for m in memories], raw, 0.0)
        out["off_topic"].append(float(np.max(scores)))
        out.setdefault("off_topic_nearest", []).append(f"{np.max(scores):.3f} {prompt!r} -> {memories[int(np.argmax(scores))]!r}")
    return out


def sweep(positive: list[float], negative: list[float], grid: np.ndarray) -> list[dict[str, float]]:
    """For each cutoff: positives below it (missed) and negatives at or above it (false alarms)."""
    rows = []
    for cut in grid:
        missed = sum(1 for s in positive if s < cut)
        false = sum(1 for s in negative if s >= cut)
        rows.append({"cutoff": round(float(cut), 3), "missed": missed, "false": false, "errors": missed + false})
    return rows


def best(rows: list[dict[str, float]], prefer_high: bool) -> dict[str, float]:
    ordered = sorted(rows, key=lambda r: (r["errors"], -r["cutoff"] if prefer_high else r["cutoff"]))
    return ordered[0]


def describe(values: list[float]) -> str:
    a = np.asarray(values)
    return f"n={len(a):3d} min={a.min():.3f} p10={np.percentile(a, 10):.3f} median={np.median(a):.3f} p90={np.percentile(a, 90):.3f} max={a.max():.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", default="local")
    parser.add_argument("--model", default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = parser.parse_args(argv)

    from mdrecall.config import parse_config
    from mdrecall.embeddings.registry import select_provider

    selection = select_provider(parse_config({"provider": args.provider, "model": args.model}))
    if selection.provider is None:
        print(f"no provider: {selection.unavailable_reason}", file=sys.stderr)
        return 1
    provider = selection.provider
    data = measure(provider)
    print(f"provider {provider.id} / {provider.model}")
    for name in ("dup", "related", "update", "relevant", "off_topic"):
        print(f"  {name:10s} {describe(data[name])}")
    low = sorted(zip(data["relevant"], [p for t in TOPICS for p in t["prompts"]]))[:6]
    for score, prompt in low:
        print(f"    weakest relevant: {score:.3f} {prompt!r}")
    print(f"  off_topic without the language check: {describe(data['off_topic_raw'])}")
    for line in sorted(data["off_topic_nearest"], reverse=True)[:3]:
        print(f"    off-topic nearest: {line}")
    print(f"  relevant memory ranked first for {int(sum(data['relevant_rank1']))}/{len(data['relevant_rank1'])} prompts")

    dup_rows = sweep(data["dup"], data["related"] + data["update"], np.arange(0.70, 0.99, 0.01))
    recall_rows = sweep(data["relevant"], data["off_topic"], np.arange(0.10, 0.71, 0.01))
    d, r = best(dup_rows, prefer_high=True), best(recall_rows, prefer_high=True)
    print(f"duplicate threshold with fewest errors: {d['cutoff']:.2f} "
          f"({d['missed']} re-statements kept twice, {d['false']} distinct memories merged)")
    print(f"recall cutoff with fewest errors:       {r['cutoff']:.2f} "
          f"({r['missed']} relevant memories not injected, {r['false']} off-topic prompts given a block)")
    safe_dup = min((r for r in dup_rows if r["false"] == 0), key=lambda r: r["cutoff"])
    safe_recall = min((r for r in recall_rows if r["false"] == 0), key=lambda r: r["cutoff"])
    print(f"lowest duplicate threshold merging no distinct memory: {safe_dup['cutoff']:.2f} "
          f"({safe_dup['missed']} re-statements kept twice)")
    print(f"lowest recall cutoff injecting nothing off-topic:     {safe_recall['cutoff']:.2f} "
          f"({safe_recall['missed']} relevant memories not injected)")
    print("\nrecall cutoff sweep (missed relevant / off-topic injected):")
    for row in recall_rows[::5]:
        print(f"  {row['cutoff']:.2f}: {row['missed']:2d} / {row['false']:2d}")
    print("duplicate threshold sweep (re-statements stored twice / distinct merged):")
    for row in dup_rows[::3]:
        print(f"  {row['cutoff']:.2f}: {row['missed']:2d} / {row['false']:2d}")
    if args.json:
        args.json.write_text(json.dumps({"provider": provider.id, "model": provider.model, "scores": data,
                                         "duplicate": dup_rows, "recall": recall_rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
