"""``mdrecall watch``: sync now, then re-sync whenever memory files change (the manager's own watcher),
and answer one-shot ``search``, ``get`` and ``status`` for the workspace meanwhile (cli/warm/)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click

from mdrecall.cli.options import open_cli_manager, workspace_options
from mdrecall.errors import MdrecallError
from mdrecall.freshness.monitor import Monitored
from mdrecall.types import SyncReport


def _display_path(workspace: Path, path: Path) -> str:
    try:
        return path.relative_to(workspace).as_posix()
    except ValueError:
        return str(path)


def format_report(report: SyncReport) -> str:
    parts = [
        f"indexed {report.files_indexed}",
        f"removed {report.files_removed}",
        f"unchanged {report.files_unchanged}",
        f"skipped {report.files_skipped}",
        f"chunks {report.chunks_written}",
    ]
    if report.full_rebuild:
        parts.append(f"full rebuild ({report.rebuild_reason})")
    elif report.rebuild_reason:
        parts.append(report.rebuild_reason)
    return ", ".join(parts)


def _stamp() -> str:
    return time.strftime("%H:%M:%S")


@click.command("watch")
@workspace_options
@click.option("--debounce-ms", type=int, default=None, help="quiet period before a sync (default sync.watchDebounceMs = 1500)")
@click.option("--polling", is_flag=True, help="poll the filesystem instead of OS events (network drives, WSL)")
@click.option("--serve/--no-serve", default=True, show_default=True,
              help="answer this workspace's one-shot search, get and status from this process (a socket only "
                   "this user can use; same answers, no start-up cost)")  # fmt: skip
def watch(workspace: str, overrides: tuple[str, ...], debounce_ms: int | None, polling: bool, serve: bool) -> int:
    """Keep the index fresh: sync now, then re-sync whenever memory files change (Ctrl-C to stop).
    Meanwhile one-shot search, get and status with the same configuration are answered from here."""
    sync: dict[str, object] = {"watch": True}
    if debounce_ms is not None:
        sync["watchDebounceMs"] = debounce_ms
    if polling:
        sync["watchPolling"] = True
    with open_cli_manager(workspace, overrides, sync=sync) as manager:
        if not isinstance(manager, Monitored):
            raise MdrecallError(f"the {manager.backend} backend keeps itself fresh; `mdrecall watch` has nothing to watch for it")
        monitor = manager.monitor
        root = manager.workspace

        def report(paths: list[Path], result: SyncReport, seconds: float) -> None:
            shown = ", ".join(_display_path(root, p) for p in paths[:3])
            more = f" (+{len(paths) - 3} more)" if len(paths) > 3 else ""
            click.echo(f"[{_stamp()}] sync after {len(paths)} change(s) [{shown}{more}]: {format_report(result)} ({seconds:.2f}s)")

        started = time.monotonic()
        result = manager.sync()
        click.echo(f"[{_stamp()}] initial sync: {format_report(result)} ({time.monotonic() - started:.2f}s)")
        monitor.add_sync_reporter(report)
        watcher = monitor.watcher
        if watcher is None:
            raise MdrecallError(f"the file watcher could not start: {manager.status().details.get('watcher')}")
        monitor.attach_now()  # watching is this command's job: no first search to wait for
        watcher.wait_ready(60.0)  # attaching to a large tree takes a while; searches never wait for it
        click.echo(f"watching {', '.join(watcher.stats.roots) or '(nothing yet)'}; Ctrl-C to stop")
        with _serving(workspace, overrides, serve):
            try:
                while watcher.running:
                    time.sleep(0.5)
            except KeyboardInterrupt:
                click.echo("stopped")
    return 0


@contextmanager
def _serving(workspace: str, overrides: Sequence[str], serve: bool) -> Iterator[None]:
    if not serve:
        yield
        return
    from mdrecall.cli.warm.server import WarmServer

    with WarmServer(workspace, overrides, say=lambda line: click.echo(f"[{_stamp()}] {line}")):
        yield
