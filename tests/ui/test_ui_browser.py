"""The inspector in a real headless Chromium: every page, a search explained, a note opened at the
cited lines, a transcript redacted, freshness lost and restored, a candidate approved into MEMORY.md,
and the guard against cross-origin writes. One browser and one workspace (real model, hybrid search)
for the module; screenshots land in .artifacts/ui/ (and docs/img/ with MDRECALL_UI_DOCS_IMG=1)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from uihelpers import (
    ODD_NAME,
    SECRET,
    Browser,
    SharedModel,
    chromium,
    days_ago,
    demo_config,
    demo_files,
    record_recalls,
    require_chromium,
    screenshot,
    serving,
    write_workspace,
)

from mdrecall import open_manager
from mdrecall.dreaming.paths import queue_path
from mdrecall.dreaming.promotion import read_queue
from mdrecall.testing import plugin, registered
from mdrecall.ui import inspector_config

pytestmark = pytest.mark.slow


@dataclass
class Demo:
    workspace: Path
    url: str
    browser: Browser
    manager: Any

    @property
    def recent_note(self) -> str:
        return f"memory/{days_ago(3).date().isoformat()}.md"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, local_provider: Any) -> Iterator[Demo]:
    require_chromium()
    tmp = tmp_path_factory.mktemp("ui-browser")
    ws = write_workspace(tmp / "ws", demo_files())
    config = demo_config(tmp, provider="ui-local", query={"temporalDecay": {"enabled": True, "halfLifeDays": 30}})
    with registered(plugin(providers={"ui-local": lambda cfg: SharedModel(local_provider)})):
        record_recalls(ws, config)
        with open_manager(ws, inspector_config(ws, config)) as manager:
            manager.sync()  # embeds every chunk: done before the first page asks
            with serving(manager) as url, chromium(tmp / "profile") as browser:
                yield Demo(ws, url, browser, manager)


@pytest.fixture
def page(demo: Demo) -> Iterator[Any]:
    page = demo.browser.page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    page.close()
    assert errors == [], f"script errors on the page: {errors}"


def test_search_explains_why_each_hit_came_back(demo: Demo, page: Any) -> None:
    page.goto(demo.url + "/search")
    page.fill("input[name=q]", "which port does postgres listen on")
    page.press("input[name=q]", "Enter")
    page.wait_for_selector("ol.hits li.hit")
    assert page.locator(".answer .mode").inner_text() == "hybrid"
    assert page.locator("fieldset.modes input:checked").get_attribute("value") == "hybrid"
    hit = page.locator("li.hit", has=page.locator("a.citation", has_text=demo.recent_note)).first
    why = hit.locator("details.why").inner_text()
    # The pipeline's explanation, in words: each signal on the score's scale, then the score.
    assert re.search(r"keyword evidence alone scores 0\.\d\d: matched [^\n]*port[^\n]*, \d+% of the query's term weight", why)
    assert re.search(r"meaning alone scores 0\.\d\d \(similarity 0\.\d\d\)", why)
    assert re.search(r"together: 0\.\d\d", why)
    assert re.search(r"age: × 0\.9\d\d → 0\.\d\d", why)
    assert "vector score" not in why and "logit" not in why and "probability" not in why
    assert re.search(rf"dated note of {demo.recent_note[7:17]}, 3 days before the search date: score × 0\.9\d\d "
                     r"\(temporal decay, half-life 30 days\)", why)
    marked = hit.locator("pre.snippet mark").all_inner_texts()
    assert {m.lower() for m in marked} >= {"postgres", "port"}
    assert "Postgres 16 runs on db-2, port 5433." in hit.locator(".line.matched").all_inner_texts()[0]
    screenshot(page, "search", docs=True)

    citation = hit.locator("a.citation")
    cited = citation.inner_text()
    start, end = (int(n) for n in re.findall(r"L(\d+)", cited.split("#", 1)[1]))
    citation.click()
    page.wait_for_selector("table.note")
    assert page.url.endswith(f"#L{start}")
    assert page.locator("table.note tr.hl").count() == end - start + 1
    assert page.locator(f"tr#L{start}").is_visible()
    assert page.locator("table.note tr.hl mark").count() >= 2  # the query words, marked in the note too
    screenshot(page, "note")


def test_keyword_only_reads_the_same_index_without_writing_it(demo: Demo, page: Any) -> None:
    meta_before = demo.manager.status().details["meta"]
    page.goto(demo.url + "/search?q=which+port+does+postgres+listen+on")
    assert page.locator(".answer .mode").inner_text() == "hybrid"
    assert page.locator("fieldset.modes input[value=vector-only]").is_disabled()
    page.check("fieldset.modes input[value=keyword-only]")  # app.js re-runs the query
    page.wait_for_url(re.compile(r"mode=keyword-only"))
    assert page.locator(".answer .mode").inner_text() == "keyword-only"
    # Keyword evidence only: no hit shows a meaning signal, every one a keyword score and its score.
    assert page.locator("table.signals tr", has_text="meaning").count() == 0
    assert page.locator("table.signals tr", has_text="keyword (score alone)").count() == page.locator("li.hit").count() > 0
    assert "close in meaning" not in page.locator("ol.hits").inner_text()
    status = demo.manager.status()
    assert status.search_mode == "hybrid" and status.details["meta"] == meta_before
    assert not status.details.get("rebuildNeeded")
    assert sorted(p.name for p in demo.workspace.parent.glob("*.sqlite")) == ["index.sqlite", "recalls.sqlite"]


def test_untrusted_markup_renders_as_text(demo: Demo, page: Any) -> None:
    page.goto(demo.url + "/search?q=postgres+tip+5433")
    hit = page.locator("li.hit", has=page.locator("a.citation", has_text="memory/pasted.md")).first
    snippet = hit.locator("pre.snippet").inner_text()
    assert "<script>window.__xss = 1</script>" in snippet
    assert '<img src=x onerror="window.__xss = 2">' in snippet
    assert hit.locator("pre.snippet b, pre.snippet img, pre.snippet script").count() == 0
    page.goto(demo.url + "/browse/file?path=memory/pasted.md")
    assert "<b>bold?</b>" in page.locator("table.note").inner_text()
    page.goto(demo.url + "/browse?q=odd")
    assert page.locator("table.files a").inner_text() == ODD_NAME
    assert page.locator("table.files svg").count() == 0
    assert page.evaluate("window.__xss") is None
    assert page.evaluate("document.scripts.length") == 1  # app.js only


def test_browse_shows_kinds_chunks_and_what_is_skipped(demo: Demo, page: Any) -> None:
    page.goto(demo.url + "/browse")
    rows = page.locator("table.files tbody tr")
    paths = page.locator("table.files tbody tr td:first-child").all_inner_texts()
    assert "MEMORY.md" in paths and demo.recent_note in paths and "memory/huge.md" not in paths
    assert rows.count() == len(paths) == 8
    screenshot(page, "browse", docs=True)

    page.select_option("select[name=kind]", "dated")  # app.js submits the filter on change
    page.wait_for_url(re.compile(r"kind=dated"))
    kinds = page.locator("table.files tbody .badge").all_inner_texts()
    assert len(kinds) == 2 and all(k.startswith("dated ") for k in kinds)

    page.click("text=file(s) skipped by the index")
    assert "memory/huge.md" in page.locator("table.files").inner_text()
    assert "larger than limits.maxFileBytes" in page.locator("table.files").inner_text()

    page.goto(demo.url + "/browse/file?path=memory/runbook.md")
    starts = page.locator("table.note tr.chunk-start")
    assert starts.count() >= 3
    refs = page.locator("a.chunk-ref").all_inner_texts()
    assert len(refs) == starts.count() and refs[0].startswith("#1 L1")
    titles = page.locator("a.chunk-ref").evaluate_all("refs => refs.map(r => r.title)")
    assert titles and all(t.endswith(", embedded") for t in titles), titles  # every chunk has its vector
    assert page.locator(".badge", has_text="evergreen").count() == 1
    assert page.locator("td.chunks.overlap").count() > 0  # consecutive chunks share lines
    screenshot(page, "chunks", docs=True, full_page=False)


def test_transcripts_show_as_the_agent_sees_them(demo: Demo, page: Any) -> None:
    page.goto(demo.url + "/browse?kind=sessions")
    page.click("table.files a")
    page.wait_for_selector("table.note")
    text = page.locator("table.note").inner_text()
    assert "[REDACTED:openai_key]" in text and SECRET not in page.content()
    assert "Assistant: It is called kestrel." in text
    assert page.locator("table.note td.ln").all_inner_texts() == ["1", "2", "3", "4"]  # JSONL line numbers
    screenshot(page, "transcript")


def test_health_tells_whether_the_index_is_fresh(demo: Demo, page: Any) -> None:
    page.goto(demo.url + "/health")
    verdict = page.locator(".verdict .headline")
    assert verdict.get_attribute("data-fresh") == "yes"
    assert page.locator("[aria-label=search] [data-mode]").inner_text() == "hybrid"
    assert "ok" in page.locator("td.integrity").inner_text() or "pending" in page.locator("td.integrity").inner_text()
    screenshot(page, "health", docs=True)

    (demo.workspace / "memory" / "added-later.md").write_text("# Added later\n\nA fact written after the sync.\n")
    page.reload()
    assert verdict.get_attribute("data-fresh") == "no"
    assert "file change(s) on disk not in the index yet" in page.locator(".verdict").inner_text()
    screenshot(page, "health-stale")
    page.click("text=Sync now")
    page.wait_for_selector(".flash.ok")
    assert "Synced: 1 file(s) indexed" in page.locator(".flash.ok").inner_text()
    assert verdict.get_attribute("data-fresh") == "yes"


def test_dreaming_review_writes_the_queue_and_memory(demo: Demo, page: Any) -> None:
    page.goto(demo.url + "/dreaming")
    assert page.locator("svg.chart rect.bar").count() == 30
    recalled = [int(v) for v in page.locator("svg.chart rect.bar").evaluate_all("bars => bars.map(b => b.dataset.value)")]
    assert recalled[-4:-1] == [4, 4, 4] and recalled[-1] == 0  # four facts recalled on each of the last three days
    items = page.locator("ol.queue li.item")
    assert items.count() == 2

    postgres = items.filter(has_text="Postgres 16")
    postgres.locator("button.approve").click()
    page.wait_for_selector(".flash.ok")
    assert page.locator("ol.queue li.item", has_text="Postgres 16").locator(".badge").first.inner_text() == "approved"
    queue_text = queue_path(demo.workspace).read_text(encoding="utf-8")
    assert "- [x] Infra: Postgres 16 runs on db-2, port 5433." in queue_text

    kestrel = page.locator("ol.queue li.item", has_text="kestrel")
    kestrel.locator("details.edit summary").click()
    kestrel.locator("textarea").fill("Staging cluster: kestrel <b>not bold</b>")
    kestrel.locator("button[value=edit]").click()
    page.wait_for_selector(".flash.ok")
    edited = page.locator("ol.queue li.item", has_text="Staging cluster")
    assert edited.locator("p.fact").inner_text() == "Staging cluster: kestrel <b>not bold</b>"
    assert edited.locator("p.fact b").count() == 0
    assert [(i.status, i.text) for i in read_queue(demo.workspace).items] == [
        ("approved", "Infra: Postgres 16 runs on db-2, port 5433."),
        ("pending", "Staging cluster: kestrel <b>not bold</b>"),
    ]
    screenshot(page, "dreaming", docs=True)

    page.click("text=Write approved to MEMORY.md")
    page.wait_for_selector(".flash.ok")
    assert "Wrote 1 fact(s) to MEMORY.md" in page.locator(".flash.ok").inner_text()
    memory = (demo.workspace / "MEMORY.md").read_text(encoding="utf-8")
    assert re.search(r"^- Infra: Postgres 16 runs on db-2, port 5433\. <!-- mdrecall:promoted id=[0-9a-f]{12} "
                     rf"source={re.escape(demo.recent_note)}:6-6 ", memory, re.M)
    assert "kestrel" not in memory
    history = page.locator("table.history tbody").inner_text()
    assert "Infra: Postgres 16 runs on db-2, port 5433." in history and days_ago(0).date().isoformat() in history
    assert [i.text for i in read_queue(demo.workspace).items] == ["Staging cluster: kestrel <b>not bold</b>"]


class _Attacker(BaseHTTPRequestHandler):
    """A page on another loopback port (same site for cookies: SameSite does not stop it) that posts
    to the inspector by a form and by fetch."""

    target = ""
    key = ""

    def do_GET(self) -> None:
        body = f"""<!doctype html><html><body>
<form id="f" method="post" action="{self.target}/dreaming/queue">
<input name="key" value="{self.key}"><input name="action" value="approve"></form>
<script>
fetch("{self.target}/health/sync", {{method: "POST", mode: "no-cors", credentials: "include"}})
  .catch(() => null).finally(() => document.getElementById("f").submit());
</script></body></html>""".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_the_guard_refuses_foreign_origins_and_missing_csrf_tokens(demo: Demo, page: Any) -> None:
    page.goto(demo.url + "/dreaming")  # the victim's browser holds a session
    before = queue_path(demo.workspace).read_text(encoding="utf-8")
    (item,) = [i for i in read_queue(demo.workspace).items if i.status == "pending"]

    handler = type("Attacker", (_Attacker,), {"target": demo.url, "key": item.key})
    attacker = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=attacker.serve_forever, daemon=True)
    thread.start()
    try:
        page.goto(f"http://127.0.0.1:{attacker.server_address[1]}/")
        page.wait_for_url(demo.url + "/dreaming/queue")
        assert "Cross-origin write refused" in page.locator("body").inner_text()
    finally:
        attacker.shutdown()
        thread.join(5)
    assert queue_path(demo.workspace).read_text(encoding="utf-8") == before

    # A foreign Origin is refused before anything else, reads included.
    foreign = demo.browser.context.request.get(demo.url + "/search?q=postgres", headers={"Origin": "https://evil.example"})
    assert foreign.status == 403 and "Invalid Origin" in foreign.text()
    # On the inspector's own page: a write without the CSRF token is refused, with it accepted.
    page.goto(demo.url + "/health")
    statuses = page.evaluate("""async () => {
        const token = document.querySelector("meta[name=csrf-token]").content;
        const bare = await fetch("/health/sync", {method: "POST"});
        const good = await fetch("/health/sync", {method: "POST", headers: {"X-CSRF-Token": token}});
        return [bare.status, await bare.text(), good.status, good.redirected];
    }""")
    assert statuses[0] == 403 and "CSRF" in statuses[1]
    assert statuses[2:] == [200, True]
