"""Concept tags: a handful of content words naming what a fact is about (English and CJK).

Tags feed the "conceptual" score component (a fact that names several concrete things is more likely
worth keeping than "ok, done") and are shown in ``promote --explain``.

Latin text: compound tokens (``eu-west-1``, ``billing-service``) then content words, stop words and
workspace noise removed. CJK has no spaces, so runs are split by script: katakana runs (loanwords
such as データベース) and Hangul words (with trailing particles removed) are tags as they stand; Han
runs are cut at function characters and matched greedily against a small vocabulary of common
multi-character words, what is left being kept when it is 2-4 characters long (a likely word) or cut
into bigrams when longer. Hiragana is grammar (particles, endings) and never a tag.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from pathlib import PurePosixPath

from mdrecall.text import ENGLISH_STOP_WORDS

MAX_TAGS = 8

_WORKSPACE_NOISE = frozenset(
    """
    memory memories session sessions user users assistant agent file files note notes today yesterday
    tomorrow todo todos done daily log logs md txt json jsonl yaml yml http https www com org net
    will need needs want wants said says told asked ask thing things stuff maybe really still
    should could would must shall might new old good bad yes okay ok via per etc use used using
    make made take took know knew think thought see saw look looked come came went put set
    met meet meets run runs ran goes gets give gave given keep keeps kept start started call called
    check checked send sent talk talked discuss discussed mention mentioned remember
    week weeks day days month months year years time times morning afternoon evening tonight
    monday tuesday wednesday thursday friday saturday sunday
    january february march april may june july august september october november december
    """.split()
)
_STOP = ENGLISH_STOP_WORDS | _WORKSPACE_NOISE

# Domain terms kept even when short or common-looking (and their CJK equivalents).
_GLOSSARY = (
    "api", "aws", "backup", "ci", "cli", "cpu", "db", "dns", "embedding", "failover", "gateway", "gpu",
    "gpt", "http", "kv", "llm", "network", "openai", "qmd", "router", "s3", "sql", "ssh", "tls", "ui",
    "vlan", "vpn",
    "备份", "网络", "网关", "路由器", "数据库", "服务器", "部署",
    "バックアップ", "ネットワーク", "ゲートウェイ", "データベース", "サーバー",
    "백업", "네트워크", "게이트웨이", "데이터베이스", "서버",
)
_GLOSSARY_LATIN = frozenset(t for t in _GLOSSARY if t.isascii())

_HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KATAKANA = r"\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HIRAGANA = r"\u3040-\u309f"
_HANGUL = r"\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"


# Compiled on first use, not at import: these character classes cost ~40 M instructions to compile, and
# a one-shot `mdrecall search` tags concepts only when it records a fact for the first time.
@functools.cache
def _script_run() -> re.Pattern[str]:
    return re.compile(f"[{_HAN}]+|[{_KATAKANA}]+|[{_HIRAGANA}]+|[{_HANGUL}]+|[^\\W_{_HAN}{_KATAKANA}{_HIRAGANA}{_HANGUL}]+")


_COMPOUND = re.compile(r"[^\W_]+(?:[._/-][^\W_]+)+")
_DATE_LIKE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[._-].*)?$|^\d+(?:[._/:-]\d+)*$")
_COMPOUND_PARTS = re.compile(r"[._/-]")
_FILE_EXT = re.compile(r"\.(?:md|txt|json|jsonl|ya?ml|py|ts|js|html?)$")

# Function characters that end a Chinese word (particles, pronouns, copulas, measure words).
_HAN_BREAK = set("的了是在和与及或也都就而吗呢吧啊么我你他她它们这那个有为把被从对将要会能很还又并但到给让向于")
# Common multi-character words in work notes, longest matched first.
_HAN_WORDS = frozenset(
    """
    数据库 服务器 数据 迁移 部署 上线 发布 测试 预算 项目 客户 会议 周会 例会 合同 报价 截止 日期 截止日期
    需求 方案 设计 架构 接口 文档 版本 升级 回滚 监控 告警 日志 备份 恢复 网络 网关 路由器 防火墙 证书
    密码 账号 权限 用户名 邮箱 电话 地址 航班 酒店 机场 火车 出差 签证 护照 生日 医生 医院 体检 预约
    团队 同事 经理 老板 负责人 供应商 合作 伙伴 公司 部门 财务 发票 付款 工资 报销 采购 订单 库存 物流
    产品 功能 问题 故障 修复 优化 性能 延迟 缓存 队列 集群 节点 容器 镜像 配置 环境 生产 开发 代码 仓库
    分支 合并 评审 计划 目标 进度 里程碑 风险 决定 选择 使用 喜欢 偏好 习惯 素食 过敏 咖啡 茶 运动 跑步
    东京 北京 上海 深圳 广州 杭州 香港 台北 大阪 首尔 伦敦 纽约 柏林 巴黎 旧金山
    会議 移行 金曜日 月曜日 火曜日 水曜日 木曜日 土曜日 日曜日 予算 締切 顧客 契約 設計 開発 本番 環境
    障害 対応 予定 出張 新幹線 東京 大阪 京都
    """.split()
)
_HAN_MAX_WORD = max(len(w) for w in _HAN_WORDS)
_HANGUL_PARTICLES = tuple(
    sorted(
        "은 는 이 가 을 를 의 에 에서 에게 께 로 으로 와 과 도 만 부터 까지 보다 처럼 이다 입니다 합니다 한다 했다".split(),
        key=len,
        reverse=True,
    )
)


def _clean(token: str) -> str:
    token = unicodedata.normalize("NFKC", token).lower().strip(" .,;:!?'\"()[]{}<>`*_~#")
    return token.replace("_", "-")


def _latin_ok(token: str) -> bool:
    if token in _GLOSSARY_LATIN:
        return True
    if len(token) < 3 or len(token) > 32 or token in _STOP:
        return False
    if _DATE_LIKE.match(token) or _FILE_EXT.search(token):
        return False
    return any(ch.isalpha() for ch in token)


def _split_han(run: str) -> list[str]:
    """Greedy longest vocabulary match; unknown stretches end at function characters."""
    words: list[str] = []
    rest = ""
    i = 0
    while i < len(run):
        for size in range(min(_HAN_MAX_WORD, len(run) - i), 1, -1):
            if run[i : i + size] in _HAN_WORDS:
                words.extend(_leftover(rest))
                rest = ""
                words.append(run[i : i + size])
                i += size
                break
        else:
            if run[i] in _HAN_BREAK:
                words.extend(_leftover(rest))
                rest = ""
            else:
                rest += run[i]
            i += 1
    words.extend(_leftover(rest))
    return words


def _leftover(text: str) -> list[str]:
    if len(text) < 2:
        return []
    if len(text) <= 4:
        return [text]
    return [text[i : i + 2] for i in range(0, len(text) - 1, 2)]


def _strip_particle(word: str) -> str:
    for particle in _HANGUL_PARTICLES:
        if word.endswith(particle) and len(word) - len(particle) >= 2:
            return word[: -len(particle)]
    return word


def _script_tokens(text: str) -> list[str]:
    out: list[str] = []
    for run in _script_run().findall(text):
        first = run[0]
        if re.match(f"[{_HAN}]", first):
            out.extend(_split_han(run))
        elif re.match(f"[{_KATAKANA}]", first):
            if len(run) >= 3 and run != "ー" * len(run):
                out.append(run)
        elif re.match(f"[{_HIRAGANA}]", first):
            continue
        elif re.match(f"[{_HANGUL}]", first):
            word = _strip_particle(run)
            if len(word) >= 2:
                out.append(word)
        else:
            token = _clean(run)
            if _latin_ok(token):
                out.append(token)
    return out


def concept_tags(path: str, text: str, limit: int = MAX_TAGS) -> list[str]:
    """Up to ``limit`` tags: glossary terms, then compounds, then the most frequent content words."""
    name = PurePosixPath(path).stem if path else ""
    source = unicodedata.normalize("NFKC", f"{name} {text}")
    lowered = source.lower()
    ordered: list[str] = []

    for term in _GLOSSARY:
        if term.isascii():
            if re.search(rf"(?<![\w-]){re.escape(term)}(?![\w-])", lowered):
                ordered.append(term)
        elif term in source:
            ordered.append(term)

    for match in _COMPOUND.finditer(source):
        token = _clean(match.group(0))
        if _DATE_LIKE.match(token) or _FILE_EXT.search(token) or len(token) > 32:
            continue
        if any(ch.isalpha() for ch in token):
            ordered.append(token)

    words = _script_tokens(source)
    counts = Counter(words)
    first_seen = {w: i for i, w in reversed(list(enumerate(words)))}
    ordered.extend(sorted(counts, key=lambda w: (-counts[w], first_seen[w])))

    tags: list[str] = []
    for tag in ordered:
        if not tag or tag in tags:
            continue
        # "billing" adds nothing next to "billing-service".
        if any(tag in _COMPOUND_PARTS.split(t) for t in tags if _COMPOUND_PARTS.search(t)):
            continue
        tags.append(tag)
        if len(tags) >= limit:
            break
    return tags
