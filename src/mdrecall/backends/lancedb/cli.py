"""``mdrecall ltm``: the LanceDB long-term memory from the command line (a Click group, added to
``mdrecall`` by the plugin's ``register_commands``).

    mdrecall ltm list|search|stats|forget|export|import   (all with --json)
    mdrecall ltm capture -w WS --from CONVERSATION.jsonl   (lines {"role", "content"}: one finished conversation)
    mdrecall ltm recall -w WS "PROMPT"                     (the <relevant-memories> block that would be injected)
    mdrecall ltm promote [--stage | --apply]               (dreaming's review queue, for LanceDB entries)

Every command takes ``-w/--workspace`` and ``-c KEY=VALUE`` overrides and opens the workspace's
LanceDB memory whatever ``backend`` says. Exit codes: 0 success; 1 nothing found or failed; 2 bad
usage or config.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from mdrecall.cli.options import json_option, load_cli_config, workspace_options, workspace_path
from mdrecall.errors import ConfigError, MdrecallError

if TYPE_CHECKING:
    from mdrecall.backends.lancedb.manager import LanceMemoryManager


def _emit(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def _exit(code: int) -> None:
    # Through click, so `mdrecall ltm` (standalone) and `mdrecall` (main) both return the code.
    click.get_current_context().exit(code)


@contextmanager
def _manager(workspace: str, overrides: tuple[str, ...]) -> Iterator[LanceMemoryManager]:
    from mdrecall.backends import open_manager
    from mdrecall.backends.lancedb.manager import LanceMemoryManager

    root = workspace_path(workspace).resolve()
    manager = open_manager(root, load_cli_config(workspace, overrides, backend="lancedb"))
    try:
        if not isinstance(manager, LanceMemoryManager):  # a plugin replaced "lancedb"
            raise MdrecallError(f"backend 'lancedb' is provided by {type(manager).__name__}, not mdrecall's LanceDB backend")
        yield manager
    finally:
        manager.close()


class _Group(click.Group):
    """Maps mdrecall's errors to its exit codes (2: config, 1: failure) with a one-line message."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            click.echo(f"mdrecall ltm: config error: {exc}", err=True)
            ctx.exit(2)
        except MdrecallError as exc:
            click.echo(f"mdrecall ltm: {exc}", err=True)
            ctx.exit(1)
        except ValueError as exc:  # bad input found by the manager (a category, a too-long text)
            click.echo(f"mdrecall ltm: {exc}", err=True)
            ctx.exit(2)


@click.group("ltm", cls=_Group, help="Long-term memories in LanceDB (backend: lancedb).")
def ltm() -> None:
    # As `mdrecall` does: no "Loading weights" bar from transformers in a command's output.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


@ltm.command("list")
@workspace_options
@json_option
@click.option("--category", default=None, help="only this category")
@click.option("--limit", type=click.IntRange(1), default=None, help="at most this many (newest first)")
@click.option("--offset", type=click.IntRange(0), default=0)
def list_cmd(workspace: str, overrides: tuple[str, ...], as_json: bool, category: str | None, limit: int | None,
             offset: int) -> None:
    """List stored memories, newest first."""
    with _manager(workspace, overrides) as m:
        total = m.count()
        rows = m.list_entries(category=category, limit=limit, offset=offset)
    if as_json:
        _emit({"total": total, "memories": [r.to_dict() for r in rows]})
        return
    click.echo(f"Total memories: {total}")
    for r in rows:
        click.echo(f"{r.id}  [{r.category}] {r.text}")


@ltm.command("search")
@workspace_options
@json_option
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 50), default=5, show_default=True)
@click.option("--min-score", type=click.FloatRange(0, 1), default=None, help="cosine cutoff (default lancedb.searchMinScore)")
def search_cmd(workspace: str, overrides: tuple[str, ...], as_json: bool, query: str, limit: int,
               min_score: float | None) -> None:
    """Memories most similar to QUERY (cosine similarity, 0 to 1)."""
    with _manager(workspace, overrides) as m:
        hits = m.recall(query, limit=limit, min_score=min_score)
    out = [{**row.to_dict(), "score": round(score, 4)} for row, score in hits]
    if as_json:
        _emit(out)
    else:
        for h in out:
            click.echo(f"{h['score']:.3f}  {h['id']}  [{h['category']}] {h['text']}")
    if not out:
        if not as_json:
            click.echo("no matching memories", err=True)
        _exit(1)


@ltm.command("stats")
@workspace_options
@json_option
def stats_cmd(workspace: str, overrides: tuple[str, ...], as_json: bool) -> None:
    """Counts per category, the table, its versions and maintenance."""
    with _manager(workspace, overrides) as m:
        rows = m.list_entries()
        status = m.status()
    by_category: dict[str, int] = {}
    for r in rows:
        by_category[r.category] = by_category.get(r.category, 0) + 1
    table: dict[str, Any] = status.details.get("table") or {}
    data = {"total": len(rows), "byCategory": by_category, "dbPath": status.location, "provider": status.provider,
            "model": status.model, "dims": status.dims, "agentId": status.details["agentId"],
            "table": table, "maintenance": status.details["maintenance"]}  # fmt: skip
    if as_json:
        _emit(data)
        return
    click.echo(f"Total memories: {data['total']}")
    for name, n in sorted(by_category.items()):
        click.echo(f"  {name}: {n}")
    click.echo(f"table: {status.location} / {table.get('table')} ({table.get('versions')} versions, "
               f"{table.get('fragments')} fragments)")  # fmt: skip
    click.echo(f"model: {status.provider}/{status.model} ({status.dims} dims)")


@ltm.command("forget")
@workspace_options
@json_option
@click.argument("memory_id", required=False)
@click.option("--query", default=None, help="forget the one memory that clearly matches this")
def forget_cmd(workspace: str, overrides: tuple[str, ...], as_json: bool, memory_id: str | None, query: str | None) -> None:
    """Delete a memory for good (by id, or by --query when exactly one clearly matches)."""
    if not memory_id and not query:
        raise click.UsageError("give a MEMORY_ID or --query")
    with _manager(workspace, overrides) as m:
        outcome = m.forget(memory_id=memory_id, query=None if memory_id else query)
    if as_json:
        _emit(outcome)
    else:
        click.echo(outcome.get("message", outcome.get("action")))
    if outcome.get("action") == "error":
        _exit(2)
    if outcome.get("action") != "deleted":
        _exit(1)


EXPORT_FIELDS = ("id", "text", "category", "importance", "createdAt", "agentId", "source", "sessionKey", "provenance")


@ltm.command("export")
@workspace_options
@json_option
@click.option("--out", "out_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="write JSONL here instead of stdout")
def export_cmd(workspace: str, overrides: tuple[str, ...], as_json: bool, out_path: str | None) -> None:
    """Every memory as JSON lines (no vectors: import re-embeds with the current model)."""
    with _manager(workspace, overrides) as m:
        rows = [{k: v for k, v in r.to_dict().items() if k in EXPORT_FIELDS} for r in reversed(m.list_entries())]
    if as_json and out_path is None:
        _emit({"memories": rows})
        return
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if out_path:
        from mdrecall.dreaming.locking import atomic_write_text

        atomic_write_text(Path(out_path), text)
        if as_json:
            _emit({"exported": len(rows), "path": out_path})
        else:
            click.echo(f"exported {len(rows)} memories to {out_path}", err=True)
    else:
        click.echo(text, nl=False)


def _read_records(path: str) -> list[dict[str, Any]]:
    raw = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    stripped = raw.lstrip()
    if stripped.startswith("{") and '"memories"' in stripped[:200] or stripped.startswith("["):
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise click.UsageError(f"{path}: not valid JSON: {exc}") from None
        data = data.get("memories", []) if isinstance(data, dict) else data
    else:
        data = []
        for n, line in enumerate(raw.splitlines(), 1):
            if line.strip():
                try:
                    data.append(json.loads(line))
                except ValueError as exc:
                    raise click.UsageError(f"{path}:{n}: not valid JSON: {exc}") from None
    from mdrecall.backends.lancedb.manager import MAX_MEMORY_CHARS

    for n, rec in enumerate(data, 1):
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str) or not rec["text"].strip():
            raise click.UsageError(f"{path}: record {n} has no text")
        if len(rec["text"]) > MAX_MEMORY_CHARS:
            raise click.UsageError(f"{path}: record {n} is longer than {MAX_MEMORY_CHARS} characters")
    return data


@ltm.command("import")
@workspace_options
@json_option
@click.argument("path")
def import_cmd(workspace: str, overrides: tuple[str, ...], as_json: bool, path: str) -> None:
    """Store memories from an export (JSONL or JSON); duplicates of stored memories are skipped."""
    from mdrecall.backends.lancedb.categories import CATEGORIES
    from mdrecall.backends.lancedb.results import is_memory_id

    records = _read_records(path)
    items: list[dict[str, Any]] = []
    for rec in records:
        provenance = rec.get("provenance")
        items.append({
            "text": rec["text"],
            "category": rec.get("category") if rec.get("category") in CATEGORIES else None,
            "importance": rec.get("importance") if isinstance(rec.get("importance"), (int, float)) else None,
            "id": rec["id"] if isinstance(rec.get("id"), str) and is_memory_id(rec["id"]) else None,
            "createdAt": rec.get("createdAt") if isinstance(rec.get("createdAt"), int) else None,
            "provenance": {**(provenance if isinstance(provenance, dict) else {}), "via": "import"},
        })
    with _manager(workspace, overrides) as m:
        existing = {r.id for r in m.list_entries()}
        for item in items:
            if item["id"] in existing:
                item["id"] = None  # a different memory under a clashing id gets a new one
        outcomes = []
        for start in range(0, len(items), 64):
            outcomes.extend(m.store_many(items[start : start + 64], source="import"))
    created = sum(1 for o in outcomes if o["action"] == "created")
    summary = {"read": len(records), "created": created, "duplicates": len(outcomes) - created}
    if as_json:
        _emit(summary)
    else:
        click.echo(f"imported {created} of {len(records)} memories ({summary['duplicates']} already stored)")


@ltm.command("capture")
@workspace_options
@json_option
@click.option("--from", "source", required=True, help='conversation JSONL (lines {"role", "content"}); - for stdin')
@click.option("--session-key", default=None)
def capture_cmd(workspace: str, overrides: tuple[str, ...], as_json: bool, source: str, session_key: str | None) -> None:
    """Capture memories from one finished conversation, as auto-capture would."""
    raw = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    messages = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError as exc:
            raise click.UsageError(f"{source}:{n}: not valid JSON: {exc}") from None
        if not isinstance(msg, dict) or "role" not in msg or "content" not in msg:
            raise click.UsageError(f'{source}:{n}: expected {{"role", "content"}}')
        messages.append(msg)
    with _manager(workspace, overrides) as m:
        report = m.capture_turn(messages, session_key=session_key, force=True)
    if as_json:
        _emit(report)
        return
    for c in report["captured"]:
        click.echo(f"captured {c['id']}  [{c['category']}] {c['text']}")
    for d in report["duplicates"]:
        click.echo(f"already stored ({d['existingId']}): {d['text']}")
    click.echo(f"{len(report['captured'])} captured, {len(report['duplicates'])} already stored, "
               f"{len(report['skipped'])} sentences skipped", err=True)


@ltm.command("recall")
@workspace_options
@json_option
@click.argument("prompt")
def recall_cmd(workspace: str, overrides: tuple[str, ...], as_json: bool, prompt: str) -> None:
    """Print the <relevant-memories> block auto-recall would inject before PROMPT."""
    from mdrecall.agent.prompts import format_relevant_memories

    with _manager(workspace, overrides) as m:
        block = format_relevant_memories(m.recall_memories(prompt), max_chars=m.settings.recallMaxChars)
    if as_json:
        _emit({"block": block, "injected": bool(block)})
    elif block:
        click.echo(block)
    else:
        click.echo("(no memory above the recall cutoff: nothing would be injected)", err=True)
    if not block:
        _exit(1)


@ltm.command("promote")
@workspace_options
@json_option
@click.option("--stage", is_flag=True, help="add frequently recalled memories to the review queue")
@click.option("--apply", "apply_", is_flag=True, help="write approved queue items into MEMORY.md")
def promote_cmd(workspace: str, overrides: tuple[str, ...], as_json: bool, stage: bool, apply_: bool) -> None:
    """Dreaming's promotion for long-term memories (the same queue as `mdrecall promote`)."""
    from mdrecall.dreaming import promotion

    with _manager(workspace, overrides) as m:
        m.flush()
        if stage:
            result: Any = promotion.stage(m.workspace, m.config)
        elif apply_:
            result = promotion.apply(m.workspace, m.config)
        else:
            result = [ev.to_dict() for ev in promotion.list_candidates(m.workspace, m.config)
                      if ev.entry.path.startswith("ltm:")]
    data = result if isinstance(result, list) else result.to_dict()
    if as_json:
        _emit(data)
    elif isinstance(result, list):
        for ev in data:
            click.echo(f"{ev['score']:.3f}  {ev['path']}  {ev['snippet']}")
    else:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
