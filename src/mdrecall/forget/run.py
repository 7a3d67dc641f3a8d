"""One forget, start to end: the files first, then every derived store, then a byte scan to check.

Order matters. The Markdown and transcripts are rewritten first, so a sync racing with us (a
watcher, another process) can only index the new text. Then, store by store, the rows are deleted
and the files scrubbed (:mod:`~mdrecall.forget.index`, :mod:`~mdrecall.forget.postgres`,
:mod:`~mdrecall.forget.lance`, :mod:`~mdrecall.forget.dreams`); the backend in use re-indexes the
touched files in between, so the rest of a file stays searchable. Last, every local file that could
hold a copy is read byte by byte (:mod:`~mdrecall.forget.verify`): the report says what was found,
which should be nothing.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from mdrecall.contract import MemorySearchManager
from mdrecall.errors import StoreError
from mdrecall.forget import index as indexes
from mdrecall.forget import lance
from mdrecall.forget.dreams import scrub_dreams
from mdrecall.forget.plan import ForgetPlan, plan_forget
from mdrecall.forget.postgres import PostgresEraser
from mdrecall.forget.report import ConfirmationRequired, ForgetReport, NothingToForget, StoreReport
from mdrecall.forget.sources import forget_markdown, forget_transcript
from mdrecall.forget.verify import scan
from mdrecall.store.db import StoreOptions


def forget(
    memory: MemorySearchManager | str | os.PathLike[str],
    target: str,
    *,
    yes: bool = False,
    confirm: str | None = None,
    dry_run: bool = False,
    text: bool = False,
    session_key: str | None = None,
    all_sessions: bool = True,
) -> ForgetReport:
    """Forget ``target`` (lines ``path#Lx-Ly``, a memory file, an entry ``ltm:<id>`` or a text) from
    the files and from every store derived from them; returns what was removed where.

    Deleting is for good, so it needs ``yes=True``, or ``confirm=`` the token of the plan shown
    before (:func:`plan_forget`, or the :class:`ConfirmationRequired` raised otherwise, which carries
    it). ``dry_run`` only says what would go. ``memory`` is an open manager, or a workspace (opened
    and closed here). Raises ForgetTargetError for a target that names nothing, NothingToForget for
    a text found nowhere."""
    if not isinstance(memory, MemorySearchManager):
        from mdrecall.backends import open_manager

        with open_manager(memory) as manager:
            return forget(manager, target, yes=yes, confirm=confirm, dry_run=dry_run, text=text,
                          session_key=session_key, all_sessions=all_sessions)  # fmt: skip
    plan = plan_forget(memory, target, text=text, session_key=session_key, all_sessions=all_sessions)
    if plan.empty:
        raise NothingToForget(plan)
    if dry_run:
        return ForgetReport(plan, dry_run=True)
    if not yes and confirm != plan.token:
        raise ConfirmationRequired(plan, changed=confirm is not None)
    return apply_plan(memory, plan)


def apply_plan(manager: MemorySearchManager, plan: ForgetPlan) -> ForgetReport:
    """Carry out a plan (no confirmation asked: the caller had it)."""
    config = manager.config
    if config.store.readOnly:
        raise StoreError("the store is read-only here (store.readOnly): forgetting rewrites it; run it without that setting")
    workspace = manager.workspace
    report = ForgetReport(plan)
    manager.flush()  # recalls still queued for recording would bring the text back

    files = [s for s in plan.selections if s.kind != "ltm"]
    entries = [s for s in plan.selections if s.kind == "ltm"]
    for selection in files:
        try:
            if selection.kind == "memory":
                forget_markdown(workspace, selection, report)
            else:
                forget_transcript(selection, report)
        except (OSError, StoreError) as exc:  # the other files and the stores still go
            report.failures.append(f"{selection.path} was not rewritten: {exc}")
    affected: indexes.Affected = {s.path: None if s.whole else {ln.line for ln in s.lines} for s in files}
    affected.update({path: None for path in plan.stale_paths if path not in affected})

    pending: list[tuple[Path, StoreOptions, set[int], StoreReport]] = []
    eraser: PostgresEraser | None = None
    if affected:
        for path in indexes.index_files(manager):
            entry = report.store("index", str(path))
            options = indexes.store_options(config, path)
            try:
                vectors = indexes.remove_rows(path, options, affected, entry)
            except StoreError as exc:  # busy for minutes: the others still go; forgetting again finishes it
                report.failures.append(str(exc))
                continue
            if vectors is not None:
                pending.append((path, options, vectors, entry))
        try:
            eraser = PostgresEraser.for_manager(manager, report)
            if eraser is not None:
                eraser.remove(affected)
        except Exception as exc:
            report.failures.append(f"the Postgres store's rows were not deleted: {type(exc).__name__}: {exc}")
            eraser = None
        _reindex(manager, report, built=indexes.primary_index(manager) is not None)
        indexes.scrub_qmd(manager, lambda where: report.store("qmd", where))
    for path, options, vectors, entry in pending:
        try:
            indexes.scrub_index(path, options, vectors, entry)
        except StoreError as exc:
            report.failures.append(str(exc))
    if entries:
        lance.purge(manager, entries, report)
    scrub_dreams(workspace, config, {**affected, **{e.path: None for e in entries}}, plan.needles, report)
    report.applied = True
    needles = _needles_to_check(manager, plan, report)
    if eraser is not None:
        try:
            eraser.finish(needles, report)
        except Exception as exc:
            report.failures.append(f"the Postgres store was not cleaned up after the delete: {type(exc).__name__}: {exc}")
    scan(_store_files(manager), needles, report)
    return report


def _reindex(manager: MemorySearchManager, report: ForgetReport, *, built: bool) -> None:
    """Index the touched files' new text in the backend in use (the rest of each file stays searchable)."""
    if manager.backend == "builtin" and not built:
        return  # no index yet: nothing to bring up to date
    if manager.backend == "lancedb":
        return  # entries only: files are not indexed there
    try:
        manager.sync()
    except Exception as exc:  # forgetting is done; only the re-indexing of what is left waits
        report.warnings.append(f"re-indexing the changed files failed ({type(exc).__name__}: {exc}); the next sync does it")


def _source_files(manager: MemorySearchManager) -> list[Path]:
    from mdrecall.sources.hostlogs import list_host_logs
    from mdrecall.sources.transcripts import list_transcripts
    from mdrecall.sources.workspace import discover_memory_files

    out = [Path(f.abspath) for f in discover_memory_files(manager.workspace, manager.config)]
    if "sessions" in manager.config.sources:
        out.extend(path for _key, path in list_transcripts(manager.workspace, manager.config.sessions.dir))
        out.extend(path for _host, path in list_host_logs(manager.config))
    return out


def _store_files(manager: MemorySearchManager) -> list[Path]:
    from mdrecall.dreaming.paths import DREAMS_DIR
    from mdrecall.store import default_store_path

    bases = [default_store_path(manager.workspace)]
    if manager.config.store.path:
        bases.append(Path(manager.config.store.path).expanduser())
    primary = getattr(manager, "db_path", None)
    if isinstance(primary, Path):
        bases.append(primary)
    out: list[Path] = []
    for base in bases:
        if base.parent.is_dir():
            # The file, -wal, -shm, lock, damaged copies; the indexes -c overrides keep beside it.
            out.extend(sorted(base.parent.glob(f"{glob.escape(base.name)}*")))
            out.extend(sorted(base.parent.glob(f"{glob.escape(base.stem)}.override-*")))
    from mdrecall.backends.qmd.layout import default_index_dir

    out.append(default_index_dir(manager.workspace))  # a QMD home (its index, its transcript exports)
    qmd_home = getattr(getattr(manager, "layout", None), "root", None)
    if manager.backend == "qmd" and isinstance(qmd_home, Path):
        out.append(qmd_home)
    out.append(manager.workspace / DREAMS_DIR)
    folder = lance.local_folder(manager)
    if folder is not None:
        out.append(folder)
    return out


def _needles_to_check(manager: MemorySearchManager, plan: ForgetPlan, report: ForgetReport) -> list[str]:
    """Scan the memory files and transcripts; returns the forgotten texts to look for in the stores.

    A text target found in a file again is a left-over (an edit made meanwhile brought it back). A
    chosen line that another memory file also states is not: the stores rightly hold it for that
    file, so it is only looked for where it is not stated."""
    needles = list(plan.needles)
    before = len(report.remaining)
    scan(_source_files(manager), needles, report)
    found = report.remaining[before:]
    if plan.kind == "text" or not found:
        return needles
    stated = {r.needle for r in found}
    del report.remaining[before:]
    report.warnings.append(f"{len(stated)} forgotten line(s) are still stated in other memory files "
                           f"({', '.join(sorted({r.file for r in found})[:3])}): forget them there too if they must go")  # fmt: skip
    return [n for n in needles if n not in stated]
