"""The Health page over HTTP: freshness verdict and its reasons, the degradation chain, recent errors,
and the fixes `mdrecall doctor` names (its findings, when mdrecall.doctor is installed)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from uihelpers import demo_config, demo_files, serving, write_workspace

from mdrecall import open_manager
from mdrecall.ui import inspector_config


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Any, Path]]:
    ws = write_workspace(tmp_path / "ws", demo_files())
    with open_manager(ws, inspector_config(ws, demo_config(tmp_path))) as manager:
        manager.sync()
        with serving(manager) as url:
            yield url, manager, ws


def test_verdict_reasons_and_degradation_chain(served: tuple[str, Any, Path]) -> None:
    url, manager, ws = served
    page = httpx.get(url + "/health").text
    assert 'data-fresh="yes"' in page
    assert "no embedding provider: provider is &#39;none&#39; (keyword-only by configuration)" in page
    assert '<a href="/browse/skipped">1 file(s)</a>' in page
    (ws / "memory" / "new.md").write_text("# New\n\nwritten after the sync\n", encoding="utf-8")
    (ws / "MEMORY.md").unlink()
    page = httpx.get(url + "/health").text
    assert 'data-fresh="no"' in page
    assert re.search(r"<li>2 file change\(s\) on disk not in the index yet</li>", page)


def test_recent_errors_list_what_mdrecall_logged_escaped(served: tuple[str, Any, Path]) -> None:
    url, _, _ = served
    httpx.get(url + "/health")  # the lifespan has started and the handler is attached
    logging.getLogger("mdrecall.test").warning("watcher lost <b>events</b>")
    page = httpx.get(url + "/health").text
    section = page.split('aria-label="recent errors"', 1)[1].split("</section>", 1)[0]
    assert "watcher lost &lt;b&gt;events&lt;/b&gt;" in section and "(mdrecall.test)" in section


def test_the_fixes_are_doctors(served: tuple[str, Any, Path]) -> None:
    from mdrecall.doctor import diagnose

    url, manager, _ = served
    expected = {f.state for f in diagnose(manager.status(), config=manager.config, environment=False)}
    assert {"keyword-only", "skipped-files"} <= expected
    page = httpx.get(url + "/health").text
    assert set(re.findall(r'data-state="([\w-]+)"', page)) == expected
    assert "Fix: " in page


def test_a_keyword_only_answer_by_choice_is_not_degraded_and_times_are_for_people(served: tuple[str, Any, Path]) -> None:
    url, _manager, _ws = served
    page = httpx.get(url + "/search", params={"q": "zebra xylophone quasar"}).text
    answer = page.split('aria-label="how this answer was produced"')[1]
    assert 'data-mode="keyword-only"' in answer and "degraded" not in answer  # provider: none is a choice
    assert "Nothing scored above the minimum score (0.1)" in page  # keyword-only's cut-off, not minScore 0.35
    assert 'placeholder="0.1"' in page
    # Local time to the second and how long ago; no raw ISO time with microseconds.
    assert re.search(r"last sync \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \((just now|\d+ min ago)\)", answer), answer
    assert not re.search(r"\d\d:\d\d:\d\d\.\d{6}", page + httpx.get(url + "/health").text)
