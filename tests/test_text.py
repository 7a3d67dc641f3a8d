"""Word handling: query terms for natural-language questions, CJK tokens, token estimates."""

from __future__ import annotations

from mdrecall.text import (
    estimate_tokens,
    fts_index_text,
    fts_match_expression,
    query_terms,
    similarity_tokens,
    word_tokens,
)


def test_question_keeps_content_words_only() -> None:
    assert query_terms("What database did we pick for the recipes?") == ["database", "pick", "recipes"]


def test_all_stop_words_still_search_something() -> None:
    assert query_terms("who is it?") != []


def test_punctuation_and_duplicates() -> None:
    assert query_terms("Postgres, postgres... POSTGRES!!") == ["postgres"]
    assert query_terms("?!.,;") == []


def test_cjk_query_terms_are_bigrams_without_question_scaffolding() -> None:
    assert query_terms("猫") == ["猫"]
    assert query_terms("咖啡") == ["咖啡"]
    terms = query_terms("王磊喜欢什么？")
    assert "什么" not in terms
    assert {"王磊", "磊喜", "喜欢"} <= set(terms)


def test_mixed_script_query() -> None:
    terms = query_terms("Mira 的猫叫什么")
    assert terms[0] == "mira" and "猫叫" in terms and "什么" not in terms


def test_fts_index_text_spaces_out_cjk() -> None:
    assert fts_index_text("hello world") == "hello world"
    spaced = fts_index_text("王磊喜欢绿茶")
    assert spaced.split() == ["王", "磊", "喜", "欢", "绿", "茶"]


def test_match_expression_ors_terms_and_quotes_phrases() -> None:
    expr = fts_match_expression(['data"base', "咖啡", "pick"])
    assert expr == '"database" OR "咖 啡" OR "pick"'
    assert fts_match_expression([]) is None


def test_similarity_tokens_cjk_unigrams_and_bigrams() -> None:
    tokens = similarity_tokens("Go 咖啡馆")
    assert {"go", "咖", "啡", "馆", "咖啡", "啡馆"} == tokens


def test_word_tokens_lowercases() -> None:
    assert word_tokens("Hello, World 你好") == ["hello", "world", "你好"]


def test_estimate_does_not_undercount_cjk() -> None:
    text = "王磊喜欢绿茶不喝咖啡" * 10  # 100 Han characters: BERT tokenizers read one piece each
    assert estimate_tokens(text) >= 100
    assert estimate_tokens("one two three") >= 3
    assert estimate_tokens("") == 0


def test_ascii_text_is_answered_without_the_cjk_patterns_and_alike() -> None:
    """CJK_CHAR and the word tokens answer ASCII text without compiling their CJK character class
    (a cold search's cost): the same answers as the compiled patterns, ASCII or not."""
    import re

    from mdrecall import text

    texts = ["", "plain words, v0.4 and snake_case_1", "Café crêpes in München", "東京の会議は火曜日です",
             "mixed 中文 words and 한국어", "’curly’ quotes — dashes", "x", "中"]  # fmt: skip
    cjk = re.compile(f"[{text._CJK_RANGES}]")
    token = re.compile(f"[{text._CJK_RANGES}]+|[^\\W{text._CJK_RANGES}]+")
    for t in texts:
        assert text._tokens(t) == token.findall(t), t
        assert text.CJK_CHAR.findall(t) == cjk.findall(t), t
        assert bool(text.CJK_CHAR.search(t)) == bool(cjk.search(t)), t
        for pos in range(len(t) + 1):
            found, want = text.CJK_CHAR.match(t, pos), cjk.match(t, pos)
            assert (found and found.group(0)) == (want and want.group(0)), (t, pos)
    text._cjk_char.cache_clear()
    text._token.cache_clear()
    assert query_terms("What database did we pick?") == ["database", "pick"]
    assert word_tokens("Deploys go out on Tuesdays") == ["deploys", "go", "out", "on", "tuesdays"]
    assert text._cjk_char.cache_info().currsize == 0 and text._token.cache_info().currsize == 0


def test_collapse_whitespace_is_the_regex_it_replaces() -> None:
    import random
    import re
    import sys

    from mdrecall.text import collapse_whitespace

    pattern = re.compile(r"\s+")
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if pattern.fullmatch(chr(c))]
    assert len(spaces) == 29 and all(ch.isspace() for ch in spaces)  # the count the docstring gives
    rng = random.Random(3)
    alphabet = [*spaces, "a", "b", "é", "中", "\x00", "\u200b"]  # a zero-width space is not whitespace
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        assert collapse_whitespace(text) == pattern.sub(" ", text).strip(), repr(text)
