"""``mdrecall index | search | get | status``: the memory itself.

Arguments are checked by the same code as the agent tools (:func:`mdrecall.agent.tools.parse_search_args`,
:func:`~mdrecall.agent.tools.parse_get_args`), so ``-n 0``, ``--min-score 2``, an empty query or
``--lines -5`` are refused the same way over MCP and here (exit 2).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from mdrecall.cli.options import (
    INTERRUPTED,
    ProgressLine,
    as_of_option,
    carry_options,
    cli_manager,
    command_hint,
    dumps,
    echo_json,
    init_hint,
    json_option,
    load_model,
    now_option,
    open_cli_manager,
    session_key_option,
    workspace_options,
)
from mdrecall.contract import search_memory
from mdrecall.errors import MdrecallError, PathError
from mdrecall.timefmt import shown
from mdrecall.types import SearchRequest

if TYPE_CHECKING:
    from mdrecall.contract import MemorySearchManager
    from mdrecall.types import SearchHit, SearchResponse


@click.command("index")
@workspace_options
@click.option("--force", is_flag=True, help="rebuild the whole index (cached embeddings are reused)")
@json_option
@click.option("-q", "--quiet", is_flag=True, help="no progress")
def index(workspace: str, overrides: tuple[str, ...], force: bool, as_json: bool, quiet: bool) -> int:
    """Sync the index with the files (incremental; --force rebuilds)."""
    bar = ProgressLine()
    with open_cli_manager(workspace, overrides) as manager:
        load_model(manager, quiet=quiet or as_json)
        try:
            report = manager.sync(force=force, progress=None if quiet or as_json else bar)
        except KeyboardInterrupt:
            bar.done()
            if force:
                click.echo("interrupted: the rebuild was dropped; the index is as it was", err=True)
            else:
                kept = manager.status().files
                again = command_hint(workspace, overrides, "index")
                click.echo(f"interrupted: the {kept} file(s) indexed so far are kept; `{again}` indexes the rest", err=True)
            raise click.exceptions.Exit(INTERRUPTED) from None
        bar.done()
        status = manager.status()
    if as_json:
        short = {"files": status.files, "chunks": status.chunks, "provider": status.provider, "model": status.model,
                 "searchMode": status.search_mode, "dbPath": status.location}  # fmt: skip
        echo_json({"report": report.to_dict(), "status": short})
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
    if not status.files and not status.skipped:
        click.echo(f"  note: no memory files here (MEMORY.md, memory/*.md): `{init_hint(workspace)}` writes a skeleton", err=True)
    return 0


def _validated_search(query: str, max_results: int | None, min_score: float | None, corpus: str) -> tuple[str, int | None, float | None, str]:
    from mdrecall.agent.arguments import ToolInputError, parse_search_args

    args: dict[str, Any] = {"query": query, "corpus": corpus}
    if max_results is not None:
        args["maxResults"] = max_results
    if min_score is not None:
        args["minScore"] = min_score
    try:
        return parse_search_args(args)
    except ToolInputError as exc:
        raise click.UsageError(_cli_names(str(exc))) from None


def _cli_names(message: str) -> str:
    """The tool's argument names in a message, as this command's options."""
    for tool_name, option in (("maxResults", "-n"), ("minScore", "--min-score"), ("from", "--from"), ("lines", "--lines")):
        message = re.sub(rf"^{tool_name}\b", option, message)
    return message


@click.command("search")
@workspace_options
@click.argument("query")
@click.option("-n", "max_results", type=int, default=None, help="most results, 1 to 50 (default query.maxResults = 10)")
@click.option("--min-score", type=float, default=None, help="drop results scoring below this, 0 to 1 (default query.minScore)")
@click.option("--corpus", type=click.Choice(["memory", "sessions", "all"]), default="all", show_default=True,
              help="memory files, session transcripts, or both")  # fmt: skip
@session_key_option
@now_option
@as_of_option
@click.option("--explain", is_flag=True, help="how each score was built: keyword, meaning, dates, updates, age; words matched")
@click.option("--debug-scores", is_flag=True, help="with --explain: also the raw logits, BM25 figures and probability")
@click.option("--full", is_flag=True, help="print whole snippets (default: the matching lines with one line around them)")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md", "files"]), default="text", show_default=True,
              help="text for people, json, md (Markdown with citations), files (matching paths, one per line)")  # fmt: skip
@json_option
def search(
    workspace: str,
    overrides: tuple[str, ...],
    query: str,
    max_results: int | None,
    min_score: float | None,
    corpus: str,
    session_key: str | None,
    now: datetime | None,
    as_of: datetime | None,
    explain: bool,
    debug_scores: bool,
    full: bool,
    fmt: str,
    as_json: bool,
) -> int:
    """Search memory by keywords and meaning; every result cites its lines (path#Lx-Ly).

    Exit 1 when nothing matches (the reason is printed)."""
    query, max_results, min_score, corpus = _validated_search(query, max_results, min_score, corpus)
    fmt = "json" if as_json else fmt
    if debug_scores:
        overrides = (*overrides, "query.debugScores=true")
    with cli_manager(workspace, overrides, keep_open=True) as manager:
        if corpus == "sessions" and "sessions" not in manager.config.sources:
            raise MdrecallError("session transcripts are not indexed in this workspace (add sessions to the sources setting)")
        load_model(manager, quiet=fmt != "text")
        sources = None if corpus == "all" else [corpus]
        request = SearchRequest(query, max_results=max_results, min_score=min_score, session_key=session_key,
                                sources=sources, now=now, as_of=as_of)  # fmt: skip
        response = search_memory(manager, request)
        reason = _why_nothing(manager, response, session_key, min_score) if not response.results else None
    if fmt == "json":
        data = response.to_dict(camel=True)
        for hit, out in zip(response.results, data["results"], strict=True):
            out.pop("explanation", None)  # shown under "explain" with --explain, else left out
            if explain:
                out["explain"] = explanation(query, hit, response)
        if reason:
            data["reason"] = reason
        echo_json(data)
        return 0 if response.results else 1
    for warning in response.warnings:
        if warning != reason:  # "nothing relevant: ..." is printed once, as the reason
            click.echo(f"note: {carry_options(warning, workspace, overrides)}", err=True)
    if not response.results:
        click.echo(f"no matching memories: {carry_options(reason or '', workspace, overrides)}", err=True)
        return 1
    if fmt == "files":
        for path in dict.fromkeys(hit.path for hit in response.results):
            click.echo(path)
        return 0
    if fmt == "md":
        _print_markdown(query, response)
        return 0
    color = sys.stdout.isatty()
    for i, hit in enumerate(response.results, 1):
        click.echo(click.style(f"{i}. {hit.citation}", bold=True) if color else f"{i}. {hit.citation}", nl=False)
        click.echo(f"  score {hit.score:.3f}  [{hit.source}]")
        if hit.superseded_by:
            click.echo(f"   superseded by {hit.superseded_by}")
        if explain:
            _print_explanation(explanation(query, hit, response))
        for line in snippet_lines(query, hit.snippet, hit.start_line, full=full):
            click.echo(_styled(line, color))
        click.echo()
    stale = "; answered from a stale index" if response.stale else ""
    click.echo(f"({response.mode}; {response.provider}/{response.model}{stale})", err=True)
    return 0


def _why_nothing(manager: MemorySearchManager, response: SearchResponse, session_key: str | None, min_score: float | None) -> str:
    """Why a search found nothing: nothing indexed, hidden by scope, or nothing relevant enough."""
    from mdrecall.doctor import hidden_transcripts

    # A backend that knows says so itself; its warning says more ("nothing relevant: no memory
    # scored at least minScore 0.35 (best 0.041)"). "no candidates" gets the message below.
    told = getattr(response, "reason", None)
    told = next((w for w in response.warnings if w.startswith(f"{told}:")), None) if told else None
    fresh = response.freshness
    if fresh.files_on_disk == 0:
        return (f"{manager.workspace} holds no memory files (MEMORY.md, memory/*.md); "
                "create some with `mdrecall init` or `mdrecall remember \"...\"`")  # fmt: skip
    status = manager.status()
    if status.files == 0:
        if status.skipped:
            return f"nothing is indexed: all {len(status.skipped)} memory file(s) were skipped (`mdrecall doctor` says why)"
        return "nothing is indexed yet: run `mdrecall index`"
    hidden, all_hidden = hidden_transcripts(status, manager.config, session_key)
    memory_chunks = sum(int(c.get("chunks", 0)) for c in status.details.get("sourceCounts") or [] if c.get("source") == "memory")
    if hidden and (all_hidden or not memory_chunks):
        return (f"nothing relevant that this search may see; {hidden} transcript chunk(s) are hidden by scope "
                "(pass --session-key KEY, or set sessions.visibility: all)")  # fmt: skip
    threshold = manager.config.query.minScore if min_score is None else min_score
    return told or f"nothing relevant: no hit scored {threshold:g} or more (try other words, or --min-score 0)"


def explanation(query: str, hit: SearchHit, response: SearchResponse) -> dict[str, Any]:
    """What made ``hit`` come back: the backend's explanation (search/explain.py: every signal on
    the score's scale, the last step being the score), the query words found in it and the index's
    freshness. A backend that explains nothing still gets its score and the words."""
    from mdrecall.search.highlight import matched_terms

    out: dict[str, Any] = {"score": round(hit.score, 4), "mode": response.mode}
    extra = getattr(hit, "explanation", None)
    if extra:
        out.update({k: v for k, v in extra.items() if k != "score"})
    out["matchedTerms"] = matched_terms(query, hit.snippet)
    out["stale"] = response.stale
    return out


def explain_line(data: dict[str, Any]) -> str:
    """The score, built step by step, in one line for people (``why: …``)."""
    parts: list[str] = []
    keyword = data.get("keyword")
    if isinstance(keyword, dict):
        matched = ", ".join(keyword.get("matched") or []) or "no word"
        missing = ", ".join(keyword.get("missing") or [])
        parts.append(f"keyword {keyword['score']:.2f} (matched {matched}" + (f"; not {missing})" if missing else ")"))
    meaning = data.get("meaning")
    if isinstance(meaning, dict):
        parts.append(f"meaning {meaning['score']:.2f} (similarity {meaning['similarity']:.2f})")
    steps = [" and ".join(parts)] if parts else []
    if isinstance(data.get("combined"), dict):
        steps.append(f"together {data['combined']['score']:.2f}")
    if isinstance(data.get("date"), dict):
        steps.append(f"date in the question {data['date']['change']:+.2f} → {data['date']['score']:.2f}")
    speaker = data.get("speaker")
    if isinstance(speaker, dict) and "change" in speaker:
        steps.append(f"said by the {speaker['statedBy']}, asked about the {speaker['asked']} {speaker['change']:+.2f} → {speaker['score']:.2f}")
    moved = data.get("supersession")
    if isinstance(moved, dict) and "score" in moved:
        steps.append(f"knowledge update → {moved['score']:.2f}")
    if isinstance(data.get("decay"), dict):
        steps.append(f"age ×{data['decay']['multiplier']:.2f} → {data['decay']['score']:.2f}")
    built = " → ".join(steps) if steps else "no signals recorded"
    terms = ", ".join(data.get("matchedTerms") or []) or "none (matched by meaning)"
    stale = ", STALE index" if data.get("stale") else ""
    return f"why: score {data['score']:.3f} = {built}; words: {terms}; {data['mode']}{stale}"


_SHOWN = {"score", "mode", "keyword", "meaning", "combined", "date", "speaker", "decay", "matchedTerms", "stale"}


def _print_explanation(data: dict[str, Any]) -> None:
    click.echo(f"   {explain_line(data)}")
    moved = data.get("supersession")
    if isinstance(moved, dict):
        click.echo(f"        supersession: {_detail({k: v for k, v in moved.items() if k != 'score'})}")
    for name, value in data.items():
        if name not in _SHOWN and name != "supersession":
            click.echo(f"        {name}: {_detail(value)}")


def _detail(value: Any) -> str:
    """One explanation value for people: mappings as ``key value`` pairs, lists comma-separated."""
    if isinstance(value, dict):
        return "; ".join(f"{k} {_detail(v)}" for k, v in value.items() if v not in (None, [], ""))
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def snippet_lines(query: str, snippet: str, start_line: int, *, full: bool = False) -> list[tuple[int, str, bool]]:
    """(file line number, text, matched) for the lines to print: every line with ``full``, else the
    matching ones with one line of context (all lines when none match, e.g. a vector-only hit)."""
    from mdrecall.search.highlight import matching_lines

    lines = snippet.split("\n")
    marked = set(matching_lines(query, snippet))
    if full or not marked or len(lines) <= 4:
        keep = set(range(len(lines)))
    else:
        keep = {j for i in marked for j in (i - 1, i, i + 1) if 0 <= j < len(lines)}
    out: list[tuple[int, str, bool]] = []
    for i, text in enumerate(lines):
        if i in keep:
            out.append((start_line + i, text, i in marked))
        elif out and out[-1][0] != -1:
            out.append((-1, "…", False))
    return out


def _styled(line: tuple[int, str, bool], color: bool) -> str:
    number, text, matched = line
    if number == -1:
        return "      …"
    prefix = f"{number:>5}{'>' if matched else ' '} "
    if color and matched:
        return click.style(prefix, fg="green", bold=True) + click.style(text, bold=True)
    return prefix + text


def _print_markdown(query: str, response: SearchResponse) -> None:
    from mdrecall.search.highlight import matching_lines

    click.echo(f"## Memories for: {query}\n")
    for hit in response.results:
        marked = set(matching_lines(query, hit.snippet))
        newer = f"; superseded by {hit.superseded_by}" if hit.superseded_by else ""
        click.echo(f"- **{hit.citation}** (score {hit.score:.2f}, {hit.source}{newer})\n")
        for i, line in enumerate(hit.snippet.split("\n")):
            click.echo(f"  > {'**' + line.strip() + '**' if i in marked and line.strip() else line}".rstrip())
        click.echo()


def parse_citation(path: str, from_line: int | None, lines: int | None) -> tuple[str, int | None, int | None]:
    """``get path#L3-L7`` → (path, 3, 5): the citations search prints are accepted back (parsed as
    every backend's ``read_file`` parses them; here naming the lines twice is a usage error)."""
    from mdrecall.sources.reading import parse_citation as split_citation

    try:
        bare, start, count = split_citation(path)
    except PathError as exc:
        raise click.UsageError(str(exc)) from None
    if start is None:
        return path, from_line, lines
    if from_line is not None or lines is not None:
        raise click.UsageError(f"{path!r} already names its lines; drop --from/--lines (or the #L part)")
    return bare, start, count


@click.command("get")
@workspace_options
@click.argument("path")
@click.option("--from", "from_line", type=int, default=None, help="first line (1-based)")
@click.option("--lines", type=int, default=None, help="number of lines (default read.maxLines = 120)")
@json_option
def get(workspace: str, overrides: tuple[str, ...], path: str, from_line: int | None, lines: int | None, as_json: bool) -> int:
    """Print lines of a memory file: PATH, or a citation from search (memory/2026-11-05.md#L3-L7)."""
    from mdrecall.agent.arguments import ToolInputError, parse_get_args

    path, from_line, lines = parse_citation(path, from_line, lines)
    args: dict[str, Any] = {"path": path}
    if from_line is not None:
        args["from"] = from_line
    if lines is not None:
        args["lines"] = lines
    try:
        path, from_line, lines = parse_get_args(args)
    except ToolInputError as exc:
        raise click.UsageError(_cli_names(str(exc))) from None
    with cli_manager(workspace, overrides, keep_open=True) as manager:
        result = manager.read_file(path, from_line=from_line, lines=lines)
    if result.from_line > max(result.total_lines, 1):
        raise click.UsageError(f"{result.path} has {result.total_lines} line(s); line {result.from_line} is past its end")
    if as_json:
        echo_json(result.to_dict())
        return 0
    if "\x00" in result.text or "\ufffd" in result.text:
        raise MdrecallError(f"{result.path} is not UTF-8 text (a binary file?); not printing it (--json shows it escaped)")
    click.echo(result.text)
    if result.next_from is not None:
        more = command_hint(workspace, overrides, "get", result.path, "--from", str(result.next_from))
        click.echo(f"\n… more below: {more}", err=True)
    elif result.line_cut:
        click.echo(f"\n… line {result.from_line} is longer than read.maxChars and was cut: read {result.path} itself "
                   "for the whole line", err=True)
    return 0


@click.command("status")
@workspace_options
@json_option
@click.option("--deep", is_flag=True, help="also probe the embedding provider and vector extension")
def status(workspace: str, overrides: tuple[str, ...], as_json: bool, deep: bool) -> int:
    """Index health, mode and freshness (`mdrecall doctor` adds the fix for each problem)."""
    with cli_manager(workspace, overrides, keep_open=False) as manager:
        load_model(manager, quiet=as_json)
        data = manager.status().to_dict()
        if deep:
            data["probes"] = {
                "embedding": manager.probe_embedding_availability().to_dict(),
                "vector": manager.probe_vector_availability(),
            }
    if as_json:
        click.echo(dumps(data))
        return 0
    _print_status(data, lambda text: carry_options(text, workspace, overrides))
    return 0


def _print_status(status: dict[str, Any], hint: Callable[[str], str] = str) -> None:
    def out(text: str) -> None:
        click.echo(hint(text))

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
        when = f" — at {shown(fallback['at'])}" if fallback.get("at") else ""
        out(f"fallback:  {route + ': ' if route else ''}{fallback['reason']}{when}")
    vec = status.get("vector")
    if vec:
        out(f"vectors:   {vec['backend'] or 'none'}" + (f" (sqlite-vec {vec['version']})" if vec.get("version") else ""))
    cache = status.get("cache")
    if cache:
        unused = f", {cache['unused']} unused (up to {cache['maxEntries']} kept)" if "unused" in cache else f" / {cache['maxEntries']}"
        out(f"cache:     {cache['entries']} embeddings stored{unused}")
    pending = status.get("pendingChanges") or {}
    if pending and status.get("meta"):
        deferred = pending.get("deferredCount") or 0
        note = f" ({deferred} transcript append(s) below the delta thresholds)" if deferred else ""
        out(f"freshness: {pending['count']} file change(s) not indexed yet{note} — run `mdrecall index`")
    elif status.get("rebuildNeeded") and status.get("meta"):
        out(f"freshness: index must be rebuilt ({status['rebuildNeeded']}) — run `mdrecall index`")
    else:
        out(f"freshness: {'clean' if status['clean'] else 'not indexed yet — run `mdrecall index`'} (last sync {shown(status['lastSyncAt'])})")
    watcher = status.get("watcher")
    if watcher:
        out(f"watcher:   {'running' if watcher.get('running') else 'not running'}"
            + (f" ({watcher['error']})" if watcher.get("error") else ""))  # fmt: skip
    for skip in status["skipped"]:
        out(f"skipped:   {skip['path']}: {skip['reason']}")
    for host, logs in (status.get("hostLogs") or {}).items():  # sources/hostlogs.py: what indexing left out
        unknown = ", ".join(f"{k} x{v}" for k, v in logs["unknownRecords"].items())
        left = "; ".join(x for x in (f"unknown records skipped: {unknown}" if unknown else "",
                                     f"{logs['malformedLines']} malformed line(s)" if logs["malformedLines"] else "") if x)  # fmt: skip
        out(f"host logs: {host}: {logs['files']} file(s) in {logs['dir']}" + (f" ({left})" if left else ""))
    for warning in status.get("warnings") or []:
        out(f"warning:   {warning}")
    probes = status.get("probes")
    if probes:
        emb = probes["embedding"]
        out(f"probe:     embedding {'ok' if emb['ok'] else 'FAILED: ' + str(emb['error'])}; vector {probes['vector']}")
