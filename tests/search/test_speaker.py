"""Whose statement a question asks about, and the line a citation keeps."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mdrecall import open_manager
from mdrecall.search.speaker import (
    asked_names,
    asked_speaker,
    is_question,
    line_name,
    line_speakers,
    name_counts,
    prefer,
    speaker_names,
)


@pytest.mark.parametrize(
    ("query", "speaker"),
    [
        ("Where do I currently keep my old sneakers?", "user"),
        ("What is my ethnicity?", "user"),
        ("Can you recommend a show for me to watch tonight?", "user"),  # a request, about the user
        ("Can you remind me of the 7th job in the list you provided?", "assistant"),
        ("What was the move you made after 27. Kg2?", "assistant"),
        ("Which brand did you mention that uses wild rubber?", None),  # present-tense "mention": not a recall
        ("When did Caroline go to the LGBTQ support group?", None),
        ("what did your previous answer say about Tokyo trains", "assistant"),
        ("Can you remind me what the average framerate gain of the agent was?", None),  # a request formula
        ("Can you remind me where my sister lives?", "user"),
    ],
)
def test_the_asked_speaker(query: str, speaker: str | None) -> None:
    assert asked_speaker(query) == speaker


def test_lines_say_who_spoke_and_continuations_follow_their_message() -> None:
    text = "tail of a wrapped reply\nAssistant: more of it\nUser: my own words"
    assert line_speakers(text, "sessions", [4, 4, 5]) == ["assistant", "assistant", "user"]
    assert line_speakers("- user: hi\n- [D1:3] Caroline: hey\n* Assistant: ok", "memory", None) == ["user", None, "assistant"]


def test_the_other_speaker_gives_way_only_when_the_asked_one_matches() -> None:
    assert prefer([5.0, 1.0, 2.0], ["assistant", "user", None], "user") == [0.0, 1.0, 2.0]
    assert prefer([5.0, 0.0], ["assistant", "user"], "user") == [5.0, 0.0]
    assert prefer([5.0, 1.0], ["assistant", "user"], None) == [5.0, 1.0]


def test_a_first_person_question_cites_the_users_statement(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    """The assistant repeats the question's words more than the user did; the citation that fits
    is still the user's own line."""
    reply = "Storing old running sneakers: keep them in a breathable bag, away from heat, stuffed with paper."
    ws = make_ws({
        "MEMORY.md": "# Memory\n",
        "memory/2024-03-02.md": "# 2024-03-02\n\n## Session 01\n\n- user: I keep my old sneakers in a shoe rack in the garage.\n"
                                f"- assistant: {reply}\n- user: thanks\n",
    })
    config = cfg(dreaming={"enabled": False}, query={"maxInjectedChars": 150, "minScore": 0})
    with open_manager(ws, config) as m:
        hits = m.search("where do I keep my old running sneakers stored?").results
        assert hits and (hits[0].start_line, hits[0].end_line) == (5, 5), [(h.start_line, h.end_line) for h in hits]
        assert "shoe rack in the garage" in hits[0].snippet
        # Asked about what the assistant said, the reply is the line kept.
        hits = m.search("how did you suggest storing old running sneakers?").results
        assert hits and (hits[0].start_line, hits[0].end_line) == (6, 6), [(h.start_line, h.end_line) for h in hits]


def test_the_other_speakers_statement_scores_lower(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    """The same words said by the assistant and by the user: asked in the first person, the user's
    line ranks first and the reply's score pays the fitted offset (its explanation says why)."""
    ws = make_ws({
        "MEMORY.md": "# Memory\n",
        "memory/2024-03-02.md": "# 2024-03-02\n\n- assistant: Your violin lessons are on Thursday evenings at the music school.\n",
        "memory/2024-03-09.md": "# 2024-03-09\n\n- user: My violin lessons are on Thursday evenings at the music school.\n",
    })
    with open_manager(ws, cfg(dreaming={"enabled": False}, query={"minScore": 0})) as m:
        hits = m.search("when are my violin lessons at the music school?").results
        assert [h.path for h in hits] == ["memory/2024-03-09.md", "memory/2024-03-02.md"]
        assert hits[1].score < hits[0].score and hits[1].explanation["speaker"]["statedBy"] == "assistant"
        off = m.search("when are the violin lessons at the music school?").results  # third person: no speaker asked
        assert abs(off[0].score - off[1].score) < 0.05


def test_a_piece_of_a_long_reply_is_still_the_assistants(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    """A reply longer than a chunk is split; its later pieces do not start with "- assistant:", so
    who spoke them is read from the file's line."""
    filler = " ".join(f"general advice number {i} about many unrelated things." for i in range(80))
    ws = make_ws({
        "MEMORY.md": "# Memory\n",
        "memory/2024-03-02.md": f"# 2024-03-02\n\n- assistant: {filler} Your kayak rack fits the garage wall.\n",
        "memory/2024-03-09.md": "# 2024-03-09\n\n- user: I store my kayak rack on the garage wall now.\n",
    })
    with open_manager(ws, cfg(dreaming={"enabled": False}, query={"minScore": 0})) as m:
        hits = m.search("where do I store my kayak rack?").results
        assert hits[0].path == "memory/2024-03-09.md"
        piece = next(h for h in hits if h.path == "memory/2024-03-02.md")
        assert not piece.snippet.startswith("- assistant") and piece.explanation["speaker"]["statedBy"] == "assistant"


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("- [D1:3] Caroline: I went to a support group.", "caroline"),
        ("Melanie: Hey Caroline!", "melanie"),
        ("- **Tomás Ribeiro**: owns the importer", "tomás ribeiro"),
        ("- user: hi", None),  # a role, read by the role rules
        ("- note: lower-case labels name nobody", None),
        ("- Plain text without a label.", None),
    ],
)
def test_the_person_a_line_names(line: str, name: str | None) -> None:
    assert line_name(line) == name


def test_only_a_name_labelling_two_lines_is_a_speaker() -> None:
    assert speaker_names([name_counts(["caroline", "stack", "melanie", "caroline", None]), {"melanie": 1}]) == {"caroline", "melanie"}


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("What pets does Melanie have?", {"melanie"}),
        ("How long have Mel and her husband been married?", {"melanie"}),  # a capitalised short form
        ("What car does John drive?", {"john"}),  # "car" is not Caroline
        ("What is Caroline's favourite book?", {"caroline"}),
        ("Did Caroline and Melanie both go camping?", {"caroline", "melanie"}),
        ("Where is the database hosted?", set()),
    ],
)
def test_the_people_a_question_names(query: str, names: set[str]) -> None:
    assert asked_names(query, frozenset({"caroline", "melanie", "john"})) == names


def test_a_line_asks_when_the_sentences_holding_the_words_are_questions() -> None:
    def holds(sentence: str) -> bool:
        return "yoga" in sentence

    assert is_question("- [D2:4] Maria: Wow, that looks great! What kind of yoga is it?", holds)
    assert is_question("- [D2:5] Maria: Is it a martial arts place or a yoga studio? It looks awesome!", holds)
    assert not is_question("- [D2:6] Maria: I love aerial yoga. Have you tried it?", holds)
    assert is_question("Caroline: how are you? [shares a photo]")


def test_a_question_naming_a_person_prefers_that_persons_statements(
    make_ws: Callable[..., Path], cfg: Callable[..., dict]
) -> None:
    """Caroline states her own pets; asked about Melanie's, the exchange where Melanie answers ranks
    first and Caroline's statement pays the named-speaker offset, saying who stated it."""
    ws = make_ws({
        "MEMORY.md": "# Memory\n",
        "memory/2024-01-05.md": "# 2024-01-05\n\n- Caroline: My pets are two guinea pigs, Pip and Squeak.\n"
                                "- Melanie: They sound adorable!\n- Caroline: They really are.\n",
        "memory/2024-02-09.md": "# 2024-02-09\n\n- Caroline: Do you have any pets at home these days?\n"
                                "- Melanie: Yes, we got another cat named Bailey, so two cats now.\n- Caroline: Lovely.\n",
    })
    config = cfg(dreaming={"enabled": False}, query={"minScore": 0})
    with open_manager(ws, config) as m:
        hits = m.search("What pets does Melanie have?").results
        assert [h.path for h in hits] == ["memory/2024-02-09.md", "memory/2024-01-05.md"], [h.path for h in hits]
        assert hits[1].explanation["speaker"] == {**hits[1].explanation["speaker"], "asked": "Melanie", "statedBy": "Caroline"}
        assert "speaker" not in hits[0].explanation
    config["query"] = {**config["query"], "speakers": False}
    with open_manager(ws, config) as m:
        plain = m.search("What pets does Melanie have?").results
        assert all("speaker" not in h.explanation for h in plain)
        assert plain[0].path == "memory/2024-01-05.md"  # the statement that repeats the words, without the rule


def test_a_search_asks_for_each_candidate_file_once(make_ws: Callable[..., Path], cfg: Callable[..., dict]) -> None:
    """The people step and the speaker step share one read of each candidate's file per search
    (each ask of the file-line cache costs a ``stat``), and the speaker marks are still made from it."""
    from mdrecall.search.filelines import lengths_for

    ws = make_ws({
        "MEMORY.md": "# Memory\n",
        "memory/2024-03-02.md": "# 2024-03-02\n\n- Caroline: How is the pottery class going?\n- Melanie: The pottery class "
                                "starts again in May.\n- Caroline: I loved my pottery class too.\n",
        "memory/2024-03-09.md": "# 2024-03-09\n\n- Caroline: My pottery class meets on Fridays.\n- Melanie: Nice, enjoy it.\n",
    })  # fmt: skip
    with open_manager(ws, cfg(dreaming={"enabled": False}, query={"minScore": 0, "debugScores": True})) as m:
        files = lengths_for(m.workspace)
        asked: list[str] = []
        real = files.names

        def names(path: str, source: str) -> Any:
            asked.append(path)
            return real(path, source)

        files.names = names  # type: ignore[method-assign]
        hits = m.search("When does Melanie's pottery class start?").results
        assert asked and sorted(asked) == sorted(set(asked)), asked
        assert {h.path for h in hits} <= set(asked)
        caroline = next(h for h in hits if h.path == "memory/2024-03-09.md")
        assert caroline.explanation["speaker"]["statedBy"] == "Caroline"
