"""The inspector stays usable at 10k files: every list is paged, no page loads everything.

A 10k-note workspace (plus 120 files the index skips, a 20k-line note and a 3k-message transcript),
keyword-only. Each page is fetched over HTTP and its size checked against what one page of rows
holds; the times are written to .artifacts/ui/scale-timings.json (speed is measured in
benchmarks/ui_pages.py, not asserted here). One page is also loaded in Chromium.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from uihelpers import ARTIFACTS, chromium, require_chromium, screenshot, serving

from mdrecall import open_manager
from mdrecall.ui import inspector_config

pytestmark = pytest.mark.slow

NOTES = 10_000
BINARY = 120
PER_PAGE = 50
#: One page of 50 rows is about 15 KB; ten times that would mean something is not paged.
MAX_PAGE_BYTES = 150_000


def build(root: Path) -> Path:
    memory = root / "memory"
    for month in range(1, 13):
        (memory / "2025" / f"{month:02d}").mkdir(parents=True)
    (memory / "topics").mkdir()
    for i in range(NOTES):
        if i % 4 == 0:
            path = memory / "topics" / f"topic-{i:05d}.md"
        else:
            path = memory / "2025" / f"{1 + i % 12:02d}" / f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}-n{i:05d}.md"
        path.write_text(f"# Note {i}\n\n- fact {i} about topic{i % 50} on server{i % 7}\n- another line {i}\n", encoding="utf-8")
    for i in range(BINARY):
        (memory / f"binary-{i:03d}.md").write_bytes(b"\x00\x01 not text " * 4)
    (memory / "topics" / "long.md").write_text("".join(f"line {n} of a very long note\n" for n in range(1, 20_001)), encoding="utf-8")
    (root / "MEMORY.md").write_text("# Long-term memory\n\n- The big fact.\n", encoding="utf-8")
    transcripts = root / ".openclaw" / "sessions" / "main" / "transcripts"
    transcripts.mkdir(parents=True)
    lines = [json.dumps({"role": "user" if n % 2 else "assistant", "content": f"message {n} about server{n % 7}"}) for n in range(3000)]
    (transcripts / "long.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    tmp = tmp_path_factory.mktemp("ui-scale")
    ws = build(tmp / "ws")
    config = {"provider": "none", "store": {"path": str(tmp / "index.sqlite")}, "sources": ["memory", "sessions"],
              "sessions": {"visibility": "all"}, "sync": {"watch": False}}
    with open_manager(ws, inspector_config(ws, config)) as manager:
        manager.sync()
        with serving(manager) as url:
            yield url, manager


TIMINGS: dict[str, float] = {}


def fetch(url: str, path: str) -> str:
    started = time.perf_counter()
    response = httpx.get(url + path, timeout=60)
    TIMINGS[path] = round(time.perf_counter() - started, 4)
    assert response.status_code == 200, response.text[:500]
    assert len(response.content) < MAX_PAGE_BYTES, f"{path}: {len(response.content)} bytes"
    return response.text


def rows(html: str) -> int:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return body.count("<tr")


def test_file_list_is_paged(big: tuple[str, Any]) -> None:
    url, _ = big
    total = NOTES + 3  # the notes, the long note, MEMORY.md, the transcript
    first = fetch(url, "/browse")
    assert rows(first) == PER_PAGE and f"1–50 of {total} files" in first
    last_page = -(-total // PER_PAGE)
    last = fetch(url, f"/browse?page={last_page}")
    assert rows(last) == total - (last_page - 1) * PER_PAGE
    assert fetch(url, f"/browse?page={last_page + 5}").count("<tr>") == last.count("<tr>")  # past the end: the last page
    dated = fetch(url, "/browse?kind=dated&page=100")
    assert rows(dated) == PER_PAGE and len(re.findall(r'class="badge dated">dated 2025-', dated)) == PER_PAGE
    assert f"of {NOTES - NOTES // 4} files" in dated
    evergreen = fetch(url, "/browse?kind=evergreen")
    assert f"of {NOTES // 4 + 2} files" in evergreen
    one = fetch(url, "/browse?q=n09999")
    assert rows(one) == 1 and "2025-04-04-n09999.md" in one
    assert f"{BINARY} file(s) skipped by the index" in first


def test_skipped_files_are_paged(big: tuple[str, Any]) -> None:
    url, _ = big
    page = fetch(url, "/browse/skipped?page=3")
    assert rows(page) == BINARY - 2 * PER_PAGE
    assert "binary file (contains NUL bytes)" in page


def test_a_long_note_and_a_long_transcript_show_one_page_of_lines(big: tuple[str, Any]) -> None:
    url, _ = big
    note = fetch(url, "/browse/file?path=memory/topics/long.md&hl=15000-15002")
    numbers = [int(n) for n in re.findall(r'<tr class="[^"]*" id="L(\d+)"', note)]
    assert len(numbers) == 120 and numbers[0] == 14980 and 15001 in numbers  # read.maxLines, as memory_get pages
    assert note.count('class="hl') == 3
    assert "later lines" in note and "earlier lines" in note
    transcript = fetch(url, "/browse/transcript?path=.openclaw/sessions/main/transcripts/long.jsonl&from=2001")
    assert transcript.count("<tr ") == 200 and "message 2000 about server5" in transcript


def test_search_health_and_dreaming_at_10k(big: tuple[str, Any]) -> None:
    url, _ = big
    results = fetch(url, "/search?q=topic7+server3&max=20")
    assert 0 < results.count('<li class="hit"') <= 20
    health = fetch(url, "/health")
    assert 'data-fresh="yes"' in health and f"<th>files</th><td>{NOTES + 3}</td>" in health
    fetch(url, "/dreaming")


def test_the_browser_gets_one_page_of_rows(big: tuple[str, Any], tmp_path: Path) -> None:
    require_chromium()
    url, _ = big
    with chromium(tmp_path / "profile") as browser:
        page = browser.page()
        started = time.perf_counter()
        page.goto(url + "/browse?kind=dated&page=42")
        TIMINGS["chromium /browse?kind=dated&page=42"] = round(time.perf_counter() - started, 4)
        assert page.locator("table.files tbody tr").count() == PER_PAGE
        page.click("a[rel=next]")
        page.wait_for_url(re.compile(r"page=43"))
        assert page.locator("table.files tbody tr").count() == PER_PAGE
        screenshot(page, "browse-10k", full_page=False)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "scale-timings.json").write_text(json.dumps(TIMINGS, indent=2) + "\n", encoding="utf-8")
