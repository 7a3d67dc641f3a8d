"""Per-signal explanations: each hit says why it scored what it did, the CLI and the JSON shapes
carry it, and the agent tools leave it out (they say why nothing came back instead)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mdrecall import open_manager
from mdrecall.agent.tools import MemoryTools
from mdrecall.search import relevance as rel

NOTES = {
    "MEMORY.md": "# Memory\n\n- The billing service is deployed with Terraform.\n",
    "memory/2022-03-09.md": "# 2022-03-09\n\n- The office chairs vendor is Steelcase, budget 400 euros per chair.\n",
    "memory/2022-03-16.md": "# 2022-03-16\n\n- The office chairs vendor is Herman Miller, budget 400 euros per chair.\n",
    "memory/2022-03-01.md": "# 2022-03-01\n\n- Watered the ferns and paid the electricity bill.\n",
}
NOW = datetime(2022, 3, 24, tzinfo=UTC)


@pytest.fixture
def ws(make_ws: Callable[..., Path]) -> Path:
    return make_ws(NOTES)


def test_each_hit_explains_its_score_on_the_scores_scale(ws: Path, cfg: Callable[..., dict[str, Any]]) -> None:
    with open_manager(ws, cfg()) as m:
        resp = m.search("office chairs vendor budget on March 16, 2022", now=NOW, min_score=0)
    top = resp.results[0]
    assert top.path == "memory/2022-03-16.md"
    details = top.explanation
    assert details is not None and details["mode"] == "keyword-only"
    keyword = details["keyword"]
    assert {"office", "chairs", "vendor", "budget"} <= set(keyword["matched"]) and 0 < keyword["coverage"] <= 1
    # Every step is a score in [0, 1]; the steps build the score, and the last is the hit's score.
    assert 0 < keyword["score"] < details["date"]["score"] <= 1
    assert details["date"]["change"] == pytest.approx(details["date"]["score"] - keyword["score"], abs=2e-4)
    assert details["score"] == details["date"]["score"] == pytest.approx(top.score, abs=1e-4)
    # Nothing on another scale unless asked for.
    assert "debug" not in details and "logit" not in str(details) and "probability" not in details
    assert "meaning" not in details and "decay" not in details
    older = next(r for r in resp.results if r.path == "memory/2022-03-09.md")
    assert older.explanation is not None and older.explanation.get("date", {}).get("change", 0) < details["date"]["change"]


def test_the_raw_parts_only_under_debug(ws: Path, cfg: Callable[..., dict[str, Any]]) -> None:
    with open_manager(ws, cfg(query={"debugScores": True})) as m:
        top = m.search("office chairs vendor budget on March 16, 2022", now=NOW, min_score=0).results[0]
    debug = (top.explanation or {})["debug"]
    assert debug["logit"] == pytest.approx(debug["keywordLogit"] + debug["dateLogit"], abs=2e-3)
    assert top.score == pytest.approx(rel.SCALE.score(debug["logit"]), abs=1e-3)
    assert debug["probability"] == pytest.approx(rel.sigmoid(debug["logit"]), abs=1e-3)


def test_supersession_and_decay_are_explained(ws: Path, cfg: Callable[..., dict[str, Any]]) -> None:
    with open_manager(ws, cfg(query={"supersession": {"margin": 1.5}})) as m:
        plain = {r.path: r.explanation or {} for r in m.search("office chairs vendor budget", now=NOW, min_score=0).results}
    # Two dated notes may restate one fact (a different vendor, but no number or "now" says it
    # changed): the newer one is moved first, both say so, and neither is marked superseded.
    assert plain["memory/2022-03-16.md"]["supersession"]["possiblyRestates"] == ["memory/2022-03-09.md#L3"]
    assert plain["memory/2022-03-09.md"]["supersession"]["possiblyRestatedBy"] == "memory/2022-03-16.md#L3"
    assert "scores swapped" in plain["memory/2022-03-09.md"]["supersession"]["moved"]
    decay = {"temporalDecay": {"enabled": True, "halfLifeDays": 30}}
    with open_manager(ws, cfg(db="decay.sqlite", query=decay)) as m:
        resp = m.search("office chairs vendor budget", now=NOW, min_score=0)
    by_path = {r.path: r.explanation or {} for r in resp.results}
    newer, older = by_path["memory/2022-03-16.md"], by_path["memory/2022-03-09.md"]
    assert 0 < older["decay"]["multiplier"] < newer["decay"]["multiplier"] < 1
    assert newer["decay"]["score"] == pytest.approx(by_path_score(resp, "memory/2022-03-16.md"), abs=1e-4)
    assert [r.path for r in resp.results][:2] == ["memory/2022-03-16.md", "memory/2022-03-09.md"]


def by_path_score(resp: Any, path: str) -> float:
    return float(next(r.score for r in resp.results if r.path == path))


def test_json_shapes_carry_it_and_the_tools_leave_it_out(ws: Path, cfg: Callable[..., dict[str, Any]]) -> None:
    with open_manager(ws, cfg()) as m:
        resp = m.search("billing service Terraform")
        hit = resp.results[0]
        assert hit.to_dict(camel=True)["explanation"] == hit.explanation
        assert hit.to_dict()["explanation"] == hit.explanation
        assert resp.to_dict(camel=True)["reason"] is None
        tools = MemoryTools(m)
        found = tools.memory_search({"query": "billing service Terraform"})
        assert found["results"] and all("explanation" not in r for r in found["results"]) and "reason" not in found
        empty = tools.memory_search({"query": "capital of Mongolia"})
        assert empty["results"] == [] and empty["reason"] in ("nothing relevant", "no candidates")


def test_cli_explain_prints_the_signals(ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from mdrecall.cli import main

    monkeypatch.setenv("MDRECALL_HOME", str(tmp_path / "home"))
    common = ["-w", str(ws), "-c", "provider=none"]
    assert main(["search", "billing service Terraform", *common, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "why: score " in out and "keyword 0." in out and "matched billing, service, terraform" in out
    assert "probability" not in out and "logit" not in out
    assert main(["search", "billing service Terraform", *common, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "explanation" not in plain["results"][0]  # the default JSON stays small
    assert main(["search", "billing service Terraform", *common, "--json", "--explain"]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert explained["results"][0]["explain"]["keyword"]["matched"] == ["billing", "service", "terraform"]
    assert explained["results"][0]["explain"]["score"] == pytest.approx(explained["results"][0]["score"], abs=1e-4)
    assert main(["search", "billing service Terraform", *common, "--explain", "--debug-scores"]) == 0
    assert "debug: logit" in capsys.readouterr().out
    assert main(["search", "what about the ferns", *common, "--min-score", "0.99"]) == 1
    err = capsys.readouterr().err
    assert "no matching memories: nothing relevant: no memory scored at least minScore 0.99 (best 0." in err
    assert err.count("nothing relevant") == 1  # the reason, not also as a note
