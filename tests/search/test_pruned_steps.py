"""Steps a search leaves out on hits that cannot reach the results change no result
(search/pipeline.py ``_speak``, ``_Deferred``): every question is answered twice, once as shipped
and once with every step run on every candidate, and the two answers must be equal to the last
field (scores, lines, snippets, citations, explanations with their debug scores)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mdrecall import open_manager
from mdrecall.search import pipeline
from mdrecall.testing import FakeProvider, plugin, registered

PEOPLE = ["Caroline", "Melanie"]
TOPICS = ["garden", "bike", "pottery class", "adoption agency", "camping trip", "painting", "guitar", "support group"]
VERBS = ["talked about the", "went to the", "loved the", "asked about the", "planned the", "finished the"]
QUESTIONS = [
    "What did Caroline say about the garden?",
    "When did Melanie go to the pottery class?",
    "What did Caroline and Melanie plan for the camping trip?",
    "Where do I keep my bike?",
    "What did you suggest about the guitar?",
    "What did Melanie think of the adoption agency?",
    "Did Caroline go to the support group?",
    "what about the painting",
]


def _notes(days: int = 45, seed: int = 7) -> dict[str, str]:
    rng = random.Random(seed)
    files = {"MEMORY.md": "# Memory\n"}
    for d in range(days):
        lines = [f"# 2024-{3 + d // 28:02d}-{1 + d % 28:02d}", ""]
        for k in range(8):
            topic = rng.choice(TOPICS)
            who = rng.choice([*PEOPLE, "user", "assistant"])
            ask = "?" if rng.random() < 0.3 else "."
            lines.append(f"- [D{d}:{k}] {who}: I {rng.choice(VERBS)} {topic} with {rng.choice(PEOPLE)}{ask}")
        files[f"memory/2024-{3 + d // 28:02d}-{1 + d % 28:02d}.md"] = "\n".join(lines) + "\n"
    for t in range(6):  # transcripts: messages, some naming their speaker, some long enough to wrap
        messages = []
        for k in range(10):
            role = "user" if k % 2 == 0 else "assistant"
            said = f"{rng.choice(PEOPLE)}: " if rng.random() < 0.5 else ""
            tail = " and more about it" * rng.choice([0, 0, 60])
            messages.append(json.dumps({"role": role, "content": f"{said}I {rng.choice(VERBS)} {rng.choice(TOPICS)}{tail}."}))
        files[f".openclaw/sessions/main/transcripts/2024-04-{10 + t}.jsonl"] = "\n".join(messages) + "\n"
    return files


@pytest.fixture
def fake_provider() -> Iterator[None]:
    with registered(plugin(providers={"fake": lambda config: FakeProvider()})):
        yield


def _answers(m: Any) -> list[Any]:
    out = []
    for q in QUESTIONS:
        r = m.search(q, session_key="main")
        out.append((r.mode, r.reason, r.warnings, [(h.path, h.start_line, h.end_line, h.score, h.snippet, h.citation,
                                                    h.vector_score, h.text_score, h.superseded_by, h.explanation)
                                                   for h in r.results]))  # fmt: skip
    return out


@pytest.mark.parametrize("provider", ["fake", "none"])  # hybrid (offset 0: deferred), keyword-only (bounded)
def test_skipped_steps_change_no_result(provider: str, fake_provider: None, make_ws: Callable[..., Path],
                                        cfg: Callable[..., dict], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    ws = make_ws(_notes())
    calls = {"n": 0}
    real = pipeline._speaker

    def counted(*args: Any) -> bool:
        calls["n"] += 1
        return real(*args)

    monkeypatch.setattr(pipeline, "_speaker", counted)
    config = cfg(provider=provider, sources=["memory", "sessions"], dreaming={"enabled": False},
                 query={"debugScores": True, "maxResults": 6})
    with open_manager(ws, config) as m:
        m.sync()
        shipped = _answers(m)
        skipping = calls["n"]
        monkeypatch.setattr(pipeline, "_passing", lambda *args: None)  # every step on every candidate
        calls["n"] = 0
        full = _answers(m)
        assert calls["n"] > skipping, "nothing was left out: the test compares nothing"
    assert shipped[0][0] == ("hybrid" if provider == "fake" else "keyword-only")
    assert sum(len(a[3]) for a in shipped) >= len(QUESTIONS)  # they find something
    assert any(h[0].endswith(".jsonl") for a in shipped for h in a[3])  # transcripts among them
    assert shipped == full
