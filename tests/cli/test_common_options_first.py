"""`mdrecall -w WS -c K=V --json search x`: the common options written before the command's name
mean what they mean after it (cli/__init__.py ``commands_first``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mdrecall.cli import commands_first, main


@pytest.mark.parametrize(
    ("given", "run"),
    [
        (["-w", "ws", "search", "x"], ["search", "-w", "ws", "x"]),
        (["--workspace=ws", "--json", "-c", "provider=none", "get", "MEMORY.md"],
         ["get", "--workspace=ws", "--json", "-c", "provider=none", "MEMORY.md"]),
        (["search", "-w", "ws", "x"], ["search", "-w", "ws", "x"]),  # already after: untouched
        (["--version"], ["--version"]),
        (["-w", "ws"], ["-w", "ws"]),  # no command: Click says what is missing
        (["-w", "ws", "--verbose", "search"], ["-w", "ws", "--verbose", "search"]),  # unknown option: Click's to judge
        (["-w"], ["-w"]),
    ],
)  # fmt: skip
def test_common_options_move_after_the_command(given: list[str], run: list[str]) -> None:
    assert commands_first(given) == run


def test_search_with_options_first_answers_as_with_options_after(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- We deploy with a green canary.\n- Redis is the cache.\n", encoding="utf-8")
    home = {"MDRECALL_HOME": str(tmp_path / "home")}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in home.items():
            mp.setenv(key, value)
        answers = []
        for args in (["search", "-w", str(ws), "-c", "provider=none", "--json", "canary"],
                     ["-w", str(ws), "-c", "provider=none", "--json", "search", "canary"]):  # fmt: skip
            assert main(args) == 0
            answers.append(json.loads(capsys.readouterr().out))
    first, second = answers
    assert [r["citation"] for r in first["results"]] == [r["citation"] for r in second["results"]]
    assert first["results"] and "canary" in first["results"][0]["snippet"]
