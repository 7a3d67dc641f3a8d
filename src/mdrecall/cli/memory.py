"""``mdrecall index | search | get | status``: the memory itself."""

from __future__ import annotations

import json
from typing import Any

import click

from mdrecall.cli.options import ProgressLine, json_option, open_cli_manager, workspace_options


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2, default=str)


@click.command("index")
@workspace_options
@click.option("--force", is_flag=True, help="rebuild the whole index (cached embeddings are reused)")
@json_option
@click.option("-q", "--quiet", is_flag=True, help="no progress bar")
def index(workspace: str, overrides: tuple[str, ...], force: bool, as_json: bool, quiet: bool) -> int:
    """Sync the index with the files (incremental; --force rebuilds)."""
    bar = ProgressLine()
    with open_cli_manager(workspace, overrides) as manager:
        report = manager.sync(force=force, progress=None if quiet else bar)
        if not quiet:
            bar.done()
        status = manager.status()
    if as_json:
        short = {"files": status.files, "chunks": status.chunks, "provider": status.provider, "model": status.model,
                 "searchMode": status.search_mode, "dbPath": status.location}  # fmt: skip
        click.echo(_dumps({"report": report.to_dict(), "status": short}))
        return 0
    what = "rebuilt" if report.full_rebuild else "synced"
    click.echo(
        f"{what} {status.files} files / {status.chunks} chunks in {report.seconds:.2f}s "
        f"({report.files_indexed} indexed, {report.files_unchanged} unchanged, {report.files_removed} removed, "
        f"{report.files_skipped} skipped; {report.chunks_embedded} embedded, {report.cache_hits} from cache)"
    )
    if report.rebuild_reason:
        click.echo(f"reason: {report.rebuild_reason}")
    click.echo(f"mode: {status.search_mode} (provider {status.provider}, model {status.model})")
    for reason in status.mode_reasons:
        click.echo(f"  note: {reason}")
    for skip in status.skipped:
        click.echo(f"  skipped {skip.path}: {skip.reason}")
    return 0


@click.command("search")
@workspace_options
@click.argument("query")
@click.option("-n", "max_results", type=int, default=None, help="maximum results (default query.maxResults = 10)")
@click.option("--min-score", type=float, default=None, help="minimum score in [0,1] (default query.minScore)")
@click.option("--session-key", envvar="MDRECALL_SESSION_KEY", default=None, help="who is asking: include this session's transcript hits (or set MDRECALL_SESSION_KEY)")
@json_option
def search(
    workspace: str,
    overrides: tuple[str, ...],
    query: str,
    max_results: int | None,
    min_score: float | None,
    session_key: str | None,
    as_json: bool,
) -> int:
    """Search memory."""
    with open_cli_manager(workspace, overrides) as manager:
        response = manager.search(query, max_results=max_results, min_score=min_score, session_key=session_key)
    if as_json:
        click.echo(_dumps(response.to_dict(camel=True)))
        return 0 if response.results else 1
    for warning in response.warnings:
        click.echo(f"note: {warning}", err=True)
    if not response.results:
        click.echo("no matching memories", err=True)
        return 1
    for i, hit in enumerate(response.results, 1):
        click.echo(f"{i}. {hit.citation}  score {hit.score:.3f}  [{hit.source}]")
        for line in hit.snippet.splitlines():
            click.echo(f"   {line}")
        click.echo()
    click.echo(f"({response.mode}; {response.provider}/{response.model})", err=True)
    return 0


@click.command("get")
@workspace_options
@click.argument("path")
@click.option("--from", "from_line", type=int, default=None, help="first line (1-based)")
@click.option("--lines", type=int, default=None, help="number of lines (default read.maxLines = 120)")
@json_option
def get(workspace: str, overrides: tuple[str, ...], path: str, from_line: int | None, lines: int | None, as_json: bool) -> int:
    """Print lines of a memory file.

    PATH is a memory file, or a citation from search such as memory/2026-01-31.md#L3-L7 (--from and
    --lines then default to its range).
    """
    with open_cli_manager(workspace, overrides) as manager:
        result = manager.read_file(path, from_line=from_line, lines=lines)
    if as_json:
        click.echo(_dumps(result.to_dict()))
        return 0
    click.echo(result.text)
    if result.next_from is not None:
        click.echo(f"\n… more below: mdrecall get {result.path} --from {result.next_from}", err=True)
    elif result.line_cut:
        click.echo(f"\n… line {result.from_line} is longer than read.maxChars and was cut: read {result.path} itself "
                   "for the whole line", err=True)
    return 0


@click.command("status")
@workspace_options
@json_option
@click.option("--deep", is_flag=True, help="also probe the embedding provider and vector extension")
def status(workspace: str, overrides: tuple[str, ...], as_json: bool, deep: bool) -> int:
    """Index health, mode and freshness."""
    with open_cli_manager(workspace, overrides) as manager:
        data = manager.status().to_dict()
        if deep:
            data["probes"] = {
                "embedding": manager.probe_embedding_availability().to_dict(),
                "vector": manager.probe_vector_availability(),
            }
    if as_json:
        click.echo(_dumps(data))
        return 0
    _print_status(data)
    return 0


def _print_status(status: dict[str, Any]) -> None:
    out = click.echo
    out(f"workspace: {status['workspaceDir']}")
    out(f"backend:   {status['backend']}")
    out(f"index:     {status['dbPath']}")
    out(f"files:     {status['files']}  chunks: {status['chunks']}")
    out(f"mode:      {status['searchMode']}  (provider {status['provider']}, model {status['model']}, dims {status['dims']})")
    for reason in status["modeReasons"]:
        out(f"  note: {reason}")
    # Backends that hand searches to another engine say who answered the last search and why.
    answered = status.get("answeredBy")
    if answered:
        out(f"answered:  {answered} (last search)")
    fallback = status.get("fallback")
    if isinstance(fallback, dict) and fallback.get("reason"):
        route = " -> ".join(str(fallback[k]) for k in ("from", "to") if fallback.get(k))
        when = f" (at {fallback['at']})" if fallback.get("at") else ""
        out(f"fallback:  {route + ': ' if route else ''}{fallback['reason']}{when}")
    vec = status.get("vector")
    if vec:
        out(f"vectors:   {vec['backend'] or 'none'}" + (f" (sqlite-vec {vec['version']})" if vec.get("version") else ""))
    cache = status.get("cache")
    if cache:
        out(f"cache:     {cache['entries']} / {cache['maxEntries']} embeddings")
    pending = status.get("pendingChanges") or {}
    if pending:
        deferred = pending.get("deferredCount") or 0
        note = f" ({deferred} transcript append(s) below the delta thresholds)" if deferred else ""
        out(f"freshness: {pending['count']} file change(s) not indexed yet{note} — run `mdrecall index`")
    elif status.get("rebuildNeeded") and status.get("meta"):
        out(f"freshness: index must be rebuilt ({status['rebuildNeeded']}) — run `mdrecall index`")
    else:
        out(f"freshness: {'clean' if status['clean'] else 'not indexed yet'} (last sync {status['lastSyncAt'] or 'never'})")
    watcher = status.get("watcher")
    if watcher:
        out(f"watcher:   {'running' if watcher.get('running') else 'not running'}"
            + (f" ({watcher['error']})" if watcher.get("error") else ""))  # fmt: skip
    for skip in status["skipped"]:
        out(f"skipped:   {skip['path']}: {skip['reason']}")
    for warning in status.get("warnings") or []:
        out(f"warning:   {warning}")
    probes = status.get("probes")
    if probes:
        emb = probes["embedding"]
        out(f"probe:     embedding {'ok' if emb['ok'] else 'FAILED: ' + str(emb['error'])}; vector {probes['vector']}")
