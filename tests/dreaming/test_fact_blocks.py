"""Splitting notes into facts, matching them to queries, and finding them again after edits."""

from __future__ import annotations

from mdrecall.dreaming.blocks import locate, markdown_blocks, overlap
from mdrecall.dreaming.queue import parse_queue

NOTE = """---
title: daily
---
# 2026-03-02

## Acme call
- Acme wants delivery by June 3
  and a weekly status mail.
- Open questions:
  - who signs the contract?
  - [x] budget approved

| Host | Role |
|------|------|
| db-2 | primary |

```
psql -h db-2 -p 5433
```

A paragraph about nothing in particular.
"""


def test_blocks_lines_and_context() -> None:
    blocks = markdown_blocks(NOTE)
    got = [(b.start_line, b.end_line, b.text, b.heading) for b in blocks]
    assert got == [
        (7, 8, "Acme wants delivery by June 3 and a weekly status mail.", "Acme call"),
        (9, 9, "Open questions:", "Acme call"),
        (10, 10, "who signs the contract?", "Open questions"),
        (11, 11, "budget approved", "Open questions"),
        (13, 13, "Host | Role", "Acme call"),
        (15, 15, "db-2 | primary", "Acme call"),
        (17, 19, "``` psql -h db-2 -p 5433 ```", "Acme call"),
        (21, 21, "A paragraph about nothing in particular.", "Acme call"),
    ]
    # A sub-item's group is its whole top-level item (for contamination checks).
    assert blocks[2].group == "Open questions: who signs the contract? budget approved"


def test_long_paragraphs_split_into_sentences() -> None:
    para = " ".join(f"Sentence number {i} says something specific about topic {i}." for i in range(12))
    blocks = markdown_blocks(para + "\n")
    assert len(blocks) == 12 and blocks[3].text == "Sentence number 3 says something specific about topic 3."


def test_overlap_counts_query_terms_with_light_stemming_and_cjk() -> None:
    assert overlap("postgres ports", "Postgres 16 runs on db-2, port 5433.") == 2
    assert overlap("deployment of billing", "We deploy billing on Fridays") == 2  # shared 5+ letter prefix
    assert overlap("the of and", "the of and") >= 0  # stop-word-only queries still search something
    assert overlap("数据库迁移", "我们决定把数据库迁移到新的服务器") == 4
    assert overlap("数据库迁移", "服务器在机房") == 0


def test_locate_exact_moved_edited_and_gone() -> None:
    blocks = markdown_blocks(NOTE)
    exact = locate("Acme wants delivery by June 3 and a weekly status mail.", blocks, 7)
    assert exact is not None and exact.status == "exact" and (exact.start_line, exact.end_line) == (7, 8)
    moved = locate("Acme wants delivery by June 3 and a weekly status mail.", markdown_blocks("\n\n\n" + NOTE), 7)
    assert moved is not None and moved.start_line == 10
    appended = locate("who signs the contract?", markdown_blocks(NOTE.replace("contract?", "contract? (Dana)")), 10)
    assert appended is not None and appended.status == "edited" and appended.text == "who signs the contract? (Dana)"
    tweaked = locate("Acme wants delivery by June 3 and a weekly status mail.",
                     markdown_blocks(NOTE.replace("June 3", "June 10")), 7)
    assert tweaked is not None and tweaked.status == "edited" and "June 10" in tweaked.text
    assert locate("Acme wants delivery by June 3 and a weekly status mail.",
                  markdown_blocks(NOTE.replace("Acme wants delivery by June 3", "Lunch was great")), 7) is None
    # A passage is found block by block.
    passage = locate("who signs the contract?\nbudget approved", blocks, 10)
    assert passage is not None and (passage.start_line, passage.end_line) == (10, 11)


def test_queue_parsing_is_forgiving() -> None:
    text = """# Promotion queue

intro text with `[x]` in it

- [X] First fact
  continues here.
  > a note from mdrecall
  <!-- mdrecall:candidate key=memory:memory/2026-03-02.md%20x.md#aaaaaaaaaaaa source=memory/2026-03-02.md:1-1 score=0.600 recalls=3 queries=3 days=3 staged=bbbbbbbbbbbb -->

- [-] Second
  <!-- mdrecall:candidate key=memory:b#cccccccccccc source=b:1-1 score=0.5 recalls=3 queries=2 days=2 staged=cccccccccccc -->
- [ ] A hand-written item without a marker

- [] Third

  <!-- mdrecall:candidate key=memory:c#dddddddddddd source=c:2-2 score=bad recalls=3 queries=2 days=2 staged= -->
"""
    queue = parse_queue(text)
    assert [(i.status, i.text, i.key) for i in queue.items] == [
        ("approved", "First fact continues here.", "memory:memory/2026-03-02.md x.md#aaaaaaaaaaaa"),
        ("rejected", "Second", "memory:b#cccccccccccc"),
        ("pending", "Third", "memory:c#dddddddddddd"),
    ]
    assert queue.items[0].notes == ("a note from mdrecall",) and queue.items[0].edited
    assert queue.items[2].score == 0.0 and not queue.items[2].edited
    assert queue.ignored == 1
    # Rendering and parsing again gives the same items.
    again = parse_queue(queue.render())
    assert [(i.status, i.text, i.key, i.staged_hash) for i in again.items] == [
        (i.status, i.text, i.key, i.staged_hash) for i in queue.items]


def _overlap_by_scan(query: str, text: str) -> int:
    """The rule ``overlap`` implements, stated as a scan of every key: a term matches a key equal to
    its stem or, for stems of 5+ characters, a key of 5+ characters that starts it or that it starts;
    a CJK term matches when every bigram of it is a key."""
    from mdrecall.dreaming import blocks
    from mdrecall.text import CJK_CHAR

    keys = blocks._match_keys(text)
    found = 0
    for term in blocks._query_terms(query):
        if CJK_CHAR.match(term):
            found += all(b in keys for b in blocks._cjk_bigrams(term))
            continue
        stem = blocks._stem(term)
        found += stem in keys or (len(stem) >= 5 and any(
            len(k) >= 5 and (k.startswith(stem) or stem.startswith(k)) for k in keys))  # fmt: skip
    return found


def test_overlap_matches_a_scan_of_every_key() -> None:
    import random

    rng = random.Random(7)
    # Words that are prefixes of each other at every length around the 5-character line, with and
    # without stemming suffixes, plus CJK runs and mixed tokens.
    stems = ["deploy", "deployment", "deployed", "postgres", "postgresql", "post", "posts", "poster",
             "migrate", "migration", "migr", "budget", "budgets", "budge", "alpha", "alphabet", "alp",
             "会议", "会议室", "北京大学", "db2", "v0.4", "caroline", "carol", "carolina", "adopt", "adoption"]  # fmt: skip
    checked = matched = 0
    for _ in range(600):
        text = " ".join(rng.choice(stems) for _ in range(rng.randint(0, 12)))
        query = " ".join(rng.choice(stems) for _ in range(rng.randint(1, 5)))
        expected = _overlap_by_scan(query, text)
        assert overlap(query, text) == expected, (query, text)
        checked += 1
        matched += expected > 0
    assert checked == 600 and 100 < matched < 600  # both outcomes were exercised
