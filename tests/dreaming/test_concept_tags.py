"""Concept tags in English and CJK."""

from __future__ import annotations

from mdrecall.dreaming.concepts import MAX_TAGS, concept_tags


def test_english_compounds_and_content_words() -> None:
    tags = concept_tags("memory/2026-03-02.md", "Deploy the billing-service to eu-west-1 via Kubernetes; backups go to S3 nightly")
    assert tags[0] == "s3"  # glossary terms first
    assert "billing-service" in tags and "eu-west-1" in tags and "kubernetes" in tags
    assert "billing" not in tags  # a part of a compound adds nothing
    for noise in ("the", "via", "to", "2026-03-02", "memory"):
        assert noise not in tags


def test_stop_words_dates_numbers_and_noise_are_not_tags() -> None:
    assert concept_tags("memory/2026-03-02.md", "ok, done. Today we met at 10:30 on 2026-03-04 with the user.") == []


def test_chinese_words_from_vocabulary_and_short_runs() -> None:
    tags = concept_tags("memory/2026-03-02.md", "我们决定把数据库迁移到新的服务器，下周五上线")
    assert {"数据库", "迁移", "服务器", "上线"} <= set(tags)
    assert all(len(t) >= 2 for t in tags)
    assert "的" not in "".join(tags)
    tags = concept_tags("memory/2026-03-02.md", "客户张伟的预算是五万元，截止日期是六月三日")
    assert {"客户", "张伟", "预算", "截止日期"} <= set(tags)


def test_japanese_katakana_and_kanji_without_hiragana() -> None:
    tags = concept_tags("memory/2026-03-02.md", "データベースの移行は金曜日に行う予定です")
    assert {"データベース", "移行", "金曜日"} <= set(tags)
    assert not any(ch in "のはにです" for t in tags for ch in t)


def test_korean_particles_are_stripped() -> None:
    tags = concept_tags("memory/2026-03-02.md", "데이터베이스를 금요일에 이전한다")
    assert "데이터베이스" in tags and "금요일" in tags


def test_mixed_text_and_limit() -> None:
    text = "Kestrel cluster 東京 region: Postgres, Redis, Kafka, Nginx, Grafana, Loki, Tempo, Mimir, Vault"
    tags = concept_tags("memory/2026-03-02.md", text)
    assert len(tags) == MAX_TAGS
    assert "東京" in tags
