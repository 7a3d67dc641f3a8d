"""Where QMD runs for one workspace: its binary, its private home, its collections and models.

QMD keeps a global registry of collections (``~/.config/qmd/index.yml``) and one index
(``~/.cache/qmd/index.sqlite``). mdrecall gives every workspace its own QMD home under the index
home (``<mdrecall home>/index/<workspace>-<hash>.qmd/``) through environment variables, and owns the
config file there outright (rewritten from mdrecall's config; anything else in it is dropped):

    <indexDir>/config/mdrecall.yml       QMD_CONFIG_DIR (collections, models)
    <indexDir>/cache/qmd/mdrecall.sqlite XDG_CACHE_HOME (QMD's index, opened with --index mdrecall)
    <indexDir>/home/                     HOME (QMD's trust file, pid files, node-llama-cpp state)
    <indexDir>/sessions/                 transcripts exported as Markdown (sessions.py)
    <indexDir>/models/                   GGUF files QMD may load (modelsDir; never downloaded)

``--index mdrecall`` on every command also stops QMD from adopting a project-local ``.qmd/``
config found above its working directory (which is ``<indexDir>``, with ``PWD`` set to match).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from mdrecall.backends.qmd.settings import QmdSettings
from mdrecall.config import MemoryConfig, mdrecall_home
from mdrecall.sources.workspace import MEMORY_DIR, ROOT_MEMORY_FILE, extra_path_roots

INDEX_NAME = "mdrecall"
#: This checkout's launcher from scripts/install-qmd.sh (src/mdrecall/backends/qmd -> repo root).
PROJECT_LAUNCHER = Path(__file__).resolve().parents[4] / ".tools" / "qmd" / "bin" / "qmd"
BINARY_ENV = "MDRECALL_QMD_BINARY"
#: QMD 2.8's default models (llm.ts) by role, as ``qmd pull`` stores them: hf_<user>_<file>.
DEFAULT_MODEL_FILES = {
    "embed": "embeddinggemma-300M-Q8_0.gguf",
    "rerank": "qwen3-reranker-0.6b-q8_0.gguf",
    "generate": "qmd-query-expansion-1.7B-q4_k_m.gguf",
}
#: Which QMD modes need which models.
MODE_MODELS = {"search": (), "vsearch": ("embed",), "query": ("embed", "rerank", "generate")}
_GLOB_SPECIAL = set("*?[]{}()!+@\\")


def find_binary(settings: QmdSettings) -> Path | None:
    """``qmd.binary``, else $MDRECALL_QMD_BINARY, else this checkout's launcher, else ``qmd`` on PATH."""
    if settings.binary:
        return Path(settings.binary).expanduser()
    env = os.environ.get(BINARY_ENV)
    if env:
        return Path(env).expanduser()
    if PROJECT_LAUNCHER.is_file():
        return PROJECT_LAUNCHER
    found = shutil.which("qmd")
    return Path(found) if found else None


def default_index_dir(workspace: Path) -> Path:
    real = os.path.realpath(workspace)
    digest = hashlib.sha256(real.encode("utf-8")).hexdigest()[:12]
    name = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in Path(real).name)[:40] or "workspace"
    return mdrecall_home() / "index" / f"{name}-{digest}.qmd"


@dataclass(frozen=True, slots=True)
class Collection:
    """One QMD collection: the files under ``root`` matching ``pattern``."""

    name: str
    root: Path
    pattern: str
    source: str  # "memory" | "sessions"


@dataclass(frozen=True, slots=True)
class ModelFile:
    role: str
    path: Path
    present: bool
    problem: str | None  # why it cannot be used (absent, not GGUF)


def _escape_glob(name: str) -> str:
    return "".join("\\" + ch if ch in _GLOB_SPECIAL else ch for ch in name)


class QmdLayout:
    def __init__(self, workspace: Path, config: MemoryConfig) -> None:
        settings = config.qmd
        self.workspace = workspace
        self.config = config
        self.settings = settings
        self.root = Path(settings.indexDir).expanduser() if settings.indexDir else default_index_dir(workspace)
        self.config_dir = self.root / "config"
        self.config_path = self.config_dir / f"{INDEX_NAME}.yml"
        self.cache_dir = self.root / "cache"
        self.db_path = self.cache_dir / "qmd" / f"{INDEX_NAME}.sqlite"
        self.home_dir = self.root / "home"
        self.sessions_dir = self.root / "sessions"
        self.models_dir = Path(settings.modelsDir).expanduser() if settings.modelsDir else self.root / "models"

    def prepare(self) -> None:
        for directory in (self.config_dir, self.cache_dir, self.home_dir, self.sessions_dir):
            directory.mkdir(parents=True, exist_ok=True)

    # -- environment -----------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        for name in list(env):
            if name.startswith(("QMD_", "NODE_OPTIONS", "INDEX_PATH")):
                env.pop(name)  # the developer's QMD settings must not redirect our index
        env.update(
            HOME=str(self.home_dir),
            XDG_CONFIG_HOME=str(self.root / "xdg-config"),
            QMD_CONFIG_DIR=str(self.config_dir),
            XDG_CACHE_HOME=str(self.cache_dir),
            PWD=str(self.root),
            NO_COLOR="1",
            # Native llama.cpp logs must not reach the MCP stdout (QMD's bin/qmd sets these too).
            LLAMA_LOG_LEVEL="error",
            GGML_LOG_LEVEL="error",
            GGML_BACKEND_SILENT="1",
            # node-llama-cpp must never fetch llama.cpp sources to build a binding.
            NODE_LLAMA_CPP_SKIP_DOWNLOAD="true",
        )
        for role, model in self.models().items():
            env[f"QMD_{role.upper()}_MODEL"] = str(model.path)
        return env

    # -- models ----------------------------------------------------------------------------------
    def models(self) -> dict[str, ModelFile]:
        """The local file for each role, and whether it is usable. QMD gets an absolute path either
        way, so it loads that file or fails at once: a path is never a download."""
        out: dict[str, ModelFile] = {}
        configured = self.settings.models
        for role, default_name in DEFAULT_MODEL_FILES.items():
            explicit: str | None = getattr(configured, role)
            if explicit:  # a local file: the config refuses URLs (QmdModels)
                path = Path(explicit).expanduser()
                if not path.is_absolute():
                    path = self.models_dir / path
            else:
                path = self._cached_model(default_name) or self.models_dir / default_name
            out[role] = self._check_model(role, path)
        return out

    def _cached_model(self, file_name: str) -> Path | None:
        try:
            for entry in sorted(self.models_dir.iterdir()):
                if entry.is_file() and entry.name.endswith(file_name):
                    return entry
        except OSError:
            pass
        return None

    def _check_model(self, role: str, path: Path) -> ModelFile:
        if not path.is_file():
            return ModelFile(role, path, False, f"no {role} model at {path}")
        try:
            with path.open("rb") as fh:
                magic = fh.read(4)
        except OSError as exc:
            return ModelFile(role, path, False, f"{role} model {path} unreadable: {exc}")
        if magic != b"GGUF":
            # QMD deletes a model file that is not GGUF; never hand it a file it could delete.
            sentinel = self.root / "not-a-gguf" / f"{role}.gguf"
            return ModelFile(role, sentinel, False, f"{role} model {path} is not a GGUF file")
        return ModelFile(role, path, True, None)

    def missing_models(self, mode: str) -> list[ModelFile]:
        models = self.models()
        return [models[role] for role in MODE_MODELS[mode] if not models[role].present]

    # -- collections -----------------------------------------------------------------------------
    def collections(self) -> list[Collection]:
        """The workspace's memory roots (and the transcript mirror) as collections whose root exists."""
        found: list[Collection] = []
        if "memory" in self.config.sources:
            found.append(Collection("memory-root", self.workspace, ROOT_MEMORY_FILE, "memory"))
            found.append(Collection("memory-dir", self.workspace / MEMORY_DIR, "**/*.md", "memory"))
            for n, extra in enumerate(extra_path_roots(self.workspace, self.config), 1):
                if extra.is_dir():
                    found.append(Collection(f"extra-{n}", extra, "**/*.md", "memory"))
                elif extra.name.endswith(".md"):
                    found.append(Collection(f"extra-{n}", extra.parent, _escape_glob(extra.name), "memory"))
        if "sessions" in self.config.sources:
            found.append(Collection("sessions", self.sessions_dir, "**/*.md", "sessions"))
        return [c for c in found if c.root.is_dir()]

    def write_config(self) -> bool:
        """Write QMD's config (collections and models); True when it changed."""
        document = {
            "collections": {c.name: {"path": str(c.root), "pattern": c.pattern} for c in self.collections()},
            "models": {role: str(model.path) for role, model in self.models().items()},
        }
        text = "# Written by mdrecall (backend: qmd) from its config; edits here are overwritten.\n"
        text += yaml.safe_dump(document, sort_keys=True, allow_unicode=True)
        try:
            if self.config_path.read_text(encoding="utf-8") == text:
                return False
        except OSError:
            pass
        self.config_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.config_path.with_suffix(".yml.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.config_path)
        return True
