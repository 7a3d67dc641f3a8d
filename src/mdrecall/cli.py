"""The ``mdrecall`` command: a thin shell over ``open_manager``.

Exit codes: 0 success; 1 nothing found (search) or an operation failed; 2 bad usage or config.
Feature modules add their own subcommands through ``register_cli(subparsers)``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from mdrecall.errors import ConfigError, MdrecallError, PathError
from mdrecall.types import SyncProgress

#: Modules that contribute subcommands (each defines ``register_cli(subparsers)``).
FEATURE_MODULES: tuple[str, ...] = (
    "mdrecall.mcp_server",
    "mdrecall.watch",
    "mdrecall.dreaming.cli",
)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-w",
        "--workspace",
        default=os.environ.get("MDRECALL_WORKSPACE", "."),
        help="agent workspace holding MEMORY.md and memory/ (default: $MDRECALL_WORKSPACE or the current directory)",
    )
    parser.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. -c provider=none -c query.maxResults=5 (repeatable)",
    )


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"config override {item!r} must look like KEY=VALUE")
        key, raw = item.split("=", 1)
        value = yaml.safe_load(raw) if raw else ""
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def open_from_args(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from mdrecall.config import load_config
    from mdrecall.manager import open_manager

    workspace = Path(args.workspace).expanduser()
    config = load_config(workspace if workspace.is_dir() else None, parse_overrides(args.config))
    # A command runs once and exits (`mdrecall watch` attaches its own watcher): a background
    # watcher (sync.watch, on by default for long-lived processes) would only cost start-up time.
    config = config.model_copy(update={"sync": config.sync.model_copy(update={"watch": False})})
    return open_manager(workspace, config)


class _ProgressBar:
    """One self-overwriting line on a terminal; plain lines otherwise."""

    def __init__(self, stream: Any = None) -> None:
        # Look sys.stderr up now, not at import: callers (and pytest) may have replaced it since.
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self._last = 0.0

    def __call__(self, p: SyncProgress) -> None:
        now = time.monotonic()
        if not self.tty:
            if p.total and p.completed == p.total or now - self._last > 2:
                print(p.label, file=self.stream)
                self._last = now
            return
        if p.total:
            width = 30
            filled = int(width * p.completed / max(1, p.total))
            bar = "#" * filled + "-" * (width - filled)
            self.stream.write(f"\r[{bar}] {p.label[:60]:<60}")
        else:
            self.stream.write(f"\r{p.label[:90]:<92}")
        self.stream.flush()

    def done(self) -> None:
        if self.tty:
            self.stream.write("\n")


def cmd_index(args: argparse.Namespace) -> int:
    bar = _ProgressBar()
    with open_from_args(args) as manager:
        report = manager.sync(force=args.force, progress=None if args.quiet else bar)
        if not args.quiet:
            bar.done()
        status = manager.status()
    if args.json:
        print(json.dumps({"report": report.to_dict(), "status": _short_status(status)}, indent=2))
        return 0
    what = "rebuilt" if report.full_rebuild else "synced"
    print(
        f"{what} {status['files']} files / {status['chunks']} chunks in {report.seconds:.2f}s "
        f"({report.files_indexed} indexed, {report.files_unchanged} unchanged, {report.files_removed} removed, "
        f"{report.files_skipped} skipped; {report.chunks_embedded} embedded, {report.cache_hits} from cache)"
    )
    if report.rebuild_reason:
        print(f"reason: {report.rebuild_reason}")
    print(f"mode: {status['searchMode']} (provider {status['provider']}, model {status['model']})")
    for reason in status["modeReasons"]:
        print(f"  note: {reason}")
    for skip in status["skipped"]:
        print(f"  skipped {skip['path']}: {skip['reason']}")
    return 0


def _short_status(status: dict[str, Any]) -> dict[str, Any]:
    return {k: status[k] for k in ("files", "chunks", "provider", "model", "searchMode", "dbPath")}


def cmd_search(args: argparse.Namespace) -> int:
    with open_from_args(args) as manager:
        response = manager.search(
            args.query,
            max_results=args.n,
            min_score=args.min_score,
            session_key=args.session_key,
        )
    if args.json:
        print(json.dumps(response.to_dict(camel=True), ensure_ascii=False, indent=2))
        return 0 if response.results else 1
    for warning in response.warnings:
        print(f"note: {warning}", file=sys.stderr)
    if not response.results:
        print("no matching memories", file=sys.stderr)
        return 1
    for i, hit in enumerate(response.results, 1):
        print(f"{i}. {hit.citation}  score {hit.score:.3f}  [{hit.source}]")
        for line in hit.snippet.splitlines():
            print(f"   {line}")
        print()
    print(f"({response.mode}; {response.provider}/{response.model})", file=sys.stderr)
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    with open_from_args(args) as manager:
        result = manager.read_file(args.path, from_line=args.from_line, lines=args.lines)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    print(result["text"])
    if result.get("nextFrom") is not None:
        print(f"\n… more below: mdrecall get {result['path']} --from {result['nextFrom']}", file=sys.stderr)
    elif result.get("lineCut"):
        print(f"\n… line {result['from']} is longer than read.maxChars and was cut: read {result['path']} itself "
              "for the whole line", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with open_from_args(args) as manager:
        status = manager.status(deep=args.deep) if hasattr(manager, "status") else {}
        if args.deep:
            status["probes"] = {
                "embedding": manager.probe_embedding_availability().to_dict(),
                "vector": manager.probe_vector_availability(),
            }
    if args.json:
        print(json.dumps(status, ensure_ascii=False, indent=2, default=str))
        return 0
    print(f"workspace: {status['workspaceDir']}")
    print(f"index:     {status['dbPath']}")
    print(f"files:     {status['files']}  chunks: {status['chunks']}")
    print(f"mode:      {status['searchMode']}  (provider {status['provider']}, model {status['model']}, dims {status['dims']})")
    for reason in status["modeReasons"]:
        print(f"  note: {reason}")
    vec = status["vector"]
    print(f"vectors:   {vec['backend'] or 'none'}" + (f" (sqlite-vec {vec['version']})" if vec.get("version") else ""))
    cache = status["cache"]
    print(f"cache:     {cache['entries']} / {cache['maxEntries']} embeddings")
    pending = status.get("pendingChanges") or {}
    if pending:
        deferred = pending.get("deferredCount") or 0
        note = f" ({deferred} transcript append(s) below the delta thresholds)" if deferred else ""
        print(f"freshness: {pending['count']} file change(s) not indexed yet{note} — run `mdrecall index`")
    elif status.get("rebuildNeeded") and status.get("meta"):
        print(f"freshness: index must be rebuilt ({status['rebuildNeeded']}) — run `mdrecall index`")
    else:
        print(f"freshness: {'clean' if status['clean'] else 'not indexed yet'} (last sync {status['lastSyncAt'] or 'never'})")
    if status.get("watcher"):
        w = status["watcher"]
        print(f"watcher:   {'running' if w.get('running') else 'not running'}" + (f" ({w['error']})" if w.get("error") else ""))
    for skip in status["skipped"]:
        print(f"skipped:   {skip['path']}: {skip['reason']}")
    if status.get("probes"):
        emb = status["probes"]["embedding"]
        print(f"probe:     embedding {'ok' if emb['ok'] else 'FAILED: ' + str(emb['error'])}; vector {status['probes']['vector']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mdrecall", description="Long-term memory for AI agents, from Markdown files.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("index", help="sync the index with the files (incremental; --force rebuilds)")
    _add_common(p)
    p.add_argument("--force", action="store_true", help="rebuild the whole index (cached embeddings are reused)")
    p.add_argument("--json", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("search", help="search memory")
    _add_common(p)
    p.add_argument("query")
    p.add_argument("-n", type=int, default=None, help="maximum results (default query.maxResults = 10)")
    p.add_argument("--min-score", type=float, default=None, help="minimum score in [0,1] (default 0.35)")
    p.add_argument("--session-key", default=None, help="include this session's transcript hits")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("get", help="print lines of a memory file")
    _add_common(p)
    p.add_argument("path", help="a memory file, or a citation from search such as memory/2026-01-31.md#L3-L7")
    p.add_argument("--from", dest="from_line", type=int, default=None, help="first line (1-based)")
    p.add_argument("--lines", type=int, default=None, help="number of lines (default 120)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_get)

    p = sub.add_parser("status", help="index health, mode and freshness")
    _add_common(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--deep", action="store_true", help="also probe the embedding provider and vector extension")
    p.set_defaults(func=cmd_status)

    for module_name in FEATURE_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        register: Callable[[Any], None] | None = getattr(module, "register_cli", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Our own process: no "Loading weights" bar from transformers on every command (a library user's
    # progress bars are theirs to decide, so this is set here and not in the provider).
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"mdrecall: config error: {exc}", file=sys.stderr)
        return 2
    except PathError as exc:
        print(f"mdrecall: {exc} [{exc.code}]", file=sys.stderr)
        return 1
    except MdrecallError as exc:
        print(f"mdrecall: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
