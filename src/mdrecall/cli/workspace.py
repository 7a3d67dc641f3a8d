"""``mdrecall init`` (a workspace skeleton and a commented config) and ``mdrecall gc`` (indexes of
workspaces that no longer exist)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from mdrecall.cli.options import echo_json, json_option, workspace_options

MEMORY_SKELETON = """# Memory

Long-term facts for this agent: decisions, people, preferences, conventions. Keep each fact on its
own line; mdrecall indexes this file and memory/*.md. Daily notes go in memory/YYYY-MM-DD.md
(`mdrecall remember "..."` appends to today's).

## Decisions

## People

## Preferences
"""


def config_template() -> str:
    """A ``.mdrecall.yaml`` with the main keys commented out at their default values.

    Lines starting with ``# `` are keys (uncomment to change), ``## `` lines explain; built from
    :class:`~mdrecall.config.MemoryConfig` so the values shown are the defaults in force."""
    from mdrecall.config import MemoryConfig

    d = MemoryConfig()
    q, s = d.query, d.sync
    return f"""## mdrecall configuration for this workspace. Every key is optional: the values shown are the
## defaults. Uncomment a line to change it (keys are checked: a typo is an error naming the key).
## Later wins: ~/.mdrecall/config.yaml, then this file, then -c KEY=VALUE on the command line.
## `mdrecall config show` prints what is in effect; `mdrecall config validate` checks this file.
# backend: {d.backend}
## Embedding provider: auto | local | none | openai | gemini | voyage | mistral | ollama | openai-compatible
# provider: {d.provider}
## Provider to switch to (once, visibly) if an explicitly chosen one fails: none = fail closed.
# fallback: {d.fallback}
## More Markdown files or folders to index (relative to this workspace; ~ expanded).
# extraPaths: []
## Add sessions to index transcripts under .openclaw/sessions/<key>/transcripts/*.jsonl.
# sources: [memory]
# sessions:
##   own: a search sees only its own session's transcripts; all: direct sessions see every one.
#   visibility: {d.sessions.visibility}
# query:
#   maxResults: {q.maxResults}
#   minScore: {q.minScore}
#   maxInjectedChars: {q.maxInjectedChars}
#   hybrid: {{enabled: {str(q.hybrid.enabled).lower()}, vectorWeight: {q.hybrid.vectorWeight}, textWeight: {q.hybrid.textWeight}, fusion: {q.hybrid.fusion}}}
#   temporalDecay: {{enabled: {str(q.temporalDecay.enabled).lower()}, halfLifeDays: {q.temporalDecay.halfLifeDays:g}}}
#   mmr: {{enabled: {str(q.mmr.enabled).lower()}, lambda: {q.mmr.lambda_}}}
# chunking: {{tokens: {d.chunking.tokens}, overlap: {d.chunking.overlap}}}
# sync:
##   Long-lived processes (mcp, watch) watch the files; every search checks them without a watcher.
#   watch: {str(s.watch).lower()}
#   watchPolling: {str(s.watchPolling).lower()}
#   onSearch: {str(s.onSearch).lower()}
# store:
##   null: ~/.mdrecall/index/<workspace>-<hash>.sqlite (a cache; delete it any time)
#   path: null
# limits: {{maxFileBytes: {d.limits.maxFileBytes}}}
# dreaming:
#   enabled: {str(d.dreaming.enabled).lower()}
#   memoryMaxChars: {d.dreaming.memoryMaxChars}
"""


@click.command("init")
@workspace_options(must_exist=False)
@click.argument("directory", required=False)
@json_option
def init(workspace: str, overrides: tuple[str, ...], directory: str | None, as_json: bool) -> int:
    """Create a workspace: MEMORY.md, memory/ and a commented .mdrecall.yaml (existing files are kept).

    DIRECTORY defaults to -w (or the current directory)."""
    root = Path(directory or workspace).expanduser()
    if root.exists() and not root.is_dir():
        raise click.BadParameter(f"{root} exists and is not a directory", param_hint="DIRECTORY")
    created: list[str] = []
    kept: list[str] = []
    root.mkdir(parents=True, exist_ok=True)
    memory_dir = root / "memory"
    if memory_dir.is_dir():
        kept.append("memory/")
    else:
        memory_dir.mkdir()
        created.append("memory/")
    for name, text in (("MEMORY.md", MEMORY_SKELETON), (".mdrecall.yaml", config_template())):
        path = root / name
        try:
            with path.open("x", encoding="utf-8") as handle:  # never overwrite the user's file
                handle.write(text)
            created.append(name)
        except FileExistsError:
            kept.append(name)
    if as_json:
        echo_json({"workspace": str(root.resolve()), "created": created, "kept": kept})
        return 0
    click.echo(f"workspace {root.resolve()}: created {', '.join(created) or 'nothing'}"
               + (f"; kept existing {', '.join(kept)}" if kept else ""))  # fmt: skip
    w = "" if directory is None and workspace == "." else f" -w {_quote(str(root))}"
    click.echo("next:")
    click.echo(f"  mdrecall remember{w} \"We deploy on Tuesdays.\"   # write a memory")
    click.echo(f"  mdrecall search{w} \"when do we deploy?\"        # find it again")
    click.echo(f"  mdrecall doctor{w}                              # check the setup")
    return 0


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


@dataclass
class IndexFile:
    path: Path
    workspace: str | None
    #: Files that belong to it: -wal, -shm, .lock, moved-aside damaged copies.
    companions: list[Path] = field(default_factory=list)
    size: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "workspace": self.workspace, "bytes": self.size,
                "files": [str(p) for p in [self.path, *self.companions]]}  # fmt: skip


def index_files(home: Path) -> list[IndexFile]:
    """Every default-located index under ``home/index`` and the workspace it records."""
    import apsw

    from mdrecall.index.syncing import WORKSPACE_KEY

    folder = home / "index"
    out: list[IndexFile] = []
    for path in sorted(folder.glob("*.sqlite")):
        workspace: str | None = None
        try:
            conn = apsw.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = ?", (WORKSPACE_KEY,)).fetchone()
                workspace = str(row[0]) if row else None
            finally:
                conn.close()
        except apsw.Error:
            workspace = None
        companions = [p for p in folder.glob(f"{path.name}*") if p != path]
        size = sum(p.stat().st_size for p in [path, *companions] if p.is_file())
        out.append(IndexFile(path, workspace, companions, size))
    return out


@click.command("gc")
@click.option("--dry-run", is_flag=True, help="only list what would be removed")
@json_option
def gc(dry_run: bool, as_json: bool) -> int:
    """Remove indexes (under ~/.mdrecall/index or $MDRECALL_HOME/index) of workspaces that no longer
    exist. Indexes are caches: removing one loses nothing that the Markdown files do not hold."""
    from mdrecall.config import mdrecall_home
    from mdrecall.store import WriterLock, default_store_path

    removed: list[IndexFile] = []
    busy: list[IndexFile] = []
    unknown: list[IndexFile] = []
    kept = 0
    for item in index_files(mdrecall_home()):
        if item.workspace is None:
            unknown.append(item)  # built before mdrecall recorded its workspace, or unreadable
            continue
        own = default_store_path(Path(item.workspace))
        if os.path.isdir(item.workspace) or not (item.path == own or item.path.name.startswith(f"{own.stem}.override-")):
            kept += 1  # alive, or not where its workspace's index (or a -c override's) would be: moved by hand
            continue
        if dry_run:
            removed.append(item)
            continue
        lock = WriterLock(item.path)
        if not lock.acquire(0):
            busy.append(item)
            continue
        try:
            for path in [*item.companions, item.path]:
                if path != lock.path:
                    path.unlink(missing_ok=True)
        finally:
            lock.release()
            lock.path.unlink(missing_ok=True)
        removed.append(item)
    freed = sum(i.size for i in removed)
    if as_json:
        echo_json({"dryRun": dry_run, "removed": [i.to_dict() for i in removed], "busy": [i.to_dict() for i in busy],
                   "unknown": [i.to_dict() for i in unknown], "kept": kept, "bytes": freed})  # fmt: skip
        return 0
    verb = "would remove" if dry_run else "removed"
    for item in removed:
        click.echo(f"{verb} {item.path.name} ({item.size / 2**20:.1f} MiB; workspace {item.workspace} is gone)")
    for item in busy:
        click.echo(f"in use, kept: {item.path.name} (workspace {item.workspace})", err=True)
    for item in unknown:
        click.echo(f"kept {item.path.name}: it does not record its workspace (run `mdrecall index` in that workspace, "
                   "or delete it by hand: it is only a cache)", err=True)  # fmt: skip
    click.echo(f"{verb} {len(removed)} index(es), {freed / 2**20:.1f} MiB; {kept} in use by existing workspaces")
    return 0
