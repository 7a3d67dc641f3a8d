"""What a one-shot command imports: nothing it does not use (docs/cli.md has the figures). The rules
that keep it so are checked here, not timed: speed is measured in benchmarks/."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mdrecall.cli.options import _override_value

from .conftest import subprocess_env

EDGES = [
    "none", "local", "None", "NONE", "null", "Null", "NULL", "nULL", "~", "yes", "Yes", "YES", "yEs", "no", "No", "on",
    "On", "ON", "oN", "off", "Off", "OFF", "true", "True", "TRUE", "tRUE", "false", "y", "n", "Y", "N", "0", "00", "012",
    "08", "1", "10", "1_000", "0x1f", "0o17", "0b101", "1e3", "1.5", "1.", ".5", ".inf", ".nan", "-1", "+1", "1:30",
    "2026-11-05", "/tmp/x.sqlite", "/", "//", "a/b", "a.b", "a-b", "a_b", "a:b", "a: b", "a #b", "a b", "#x", "*x", "&x",
    "!x", "%x", "@x", "`x", "'x'", '"x"', "[1, 2]", "{a: 1}", "-", "--", "-x", "?", "x?", "=", "<<", "sentence-transformers/all-MiniLM-L6-v2",
]  # fmt: skip


def _random_values(n: int) -> list[str]:
    rng = random.Random(27)
    alphabet = "aNoyT01_./-:9x #"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))) for _ in range(n)]


def test_override_values_read_as_yaml_reads_them() -> None:
    for raw in EDGES + _random_values(3000):
        try:
            expected = yaml.safe_load(raw)
        except yaml.YAMLError:
            with pytest.raises(yaml.YAMLError):
                _override_value(raw)
            continue
        got = _override_value(raw)
        assert (type(got), got) == (type(expected), expected), raw


def _modules_after(tmp_path: Path, argv: list[str]) -> list[str]:
    code = ("import json, sys\nfrom mdrecall.cli import main\ncode = main(sys.argv[1:])\n"
            "print(json.dumps([code, sorted({m.split('.')[0] for m in sys.modules})]), file=sys.stderr)\n")  # fmt: skip
    env = {**subprocess_env(tmp_path / "home"), "MDRECALL_WARM": "off"}
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, timeout=120)
    code_, modules = json.loads(proc.stderr.strip().splitlines()[-1])
    assert code_ == 0, proc.stderr
    return list(modules)


def test_a_keyword_search_imports_no_numpy_and_no_yaml(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- We deploy on Tuesdays.\n", encoding="utf-8")
    store = tmp_path / "index.sqlite"
    modules = _modules_after(tmp_path, ["search", "deploy", "-w", str(ws), "-c", "provider=none", "-c", f"store.path={store}"])
    assert "numpy" not in modules and "yaml" not in modules, modules


#: Modules a cold keyword search has no use for, each of which it once imported: the agent tools'
#: handlers and registry (the CLI checks its arguments with agent.arguments alone), the Markdown
#: writer that indexing's provenance stripping brings (imported when a file is read for indexing) and
#: the concept tagger (imported when recall tracking records a daily note's fact for the first time;
#: MEMORY.md, all this search finds, is not short-term material).
NOT_FOR_A_KEYWORD_SEARCH = (
    "mdrecall.agent.tools",
    "mdrecall.agent.registry",
    "mdrecall.sources.remember",
    "mdrecall.markdown_write",
    "mdrecall.dreaming.concepts",
)
#: Regular expressions compiled on first use (their compilation cost a cold keyword search ~175 M
#: instructions), which a search of plain English notes, none of them a daily note recalled for the
#: first time, never needs: module (when imported at all), then the function that compiles each
#: (and each of redaction's token formats, in ``_TOKEN_PATTERNS``).
#: (``_cjk_char`` and ``_token``: ASCII text and queries are answered without them.)
LAZY_PATTERNS = {
    "mdrecall.text": ("_cjk_run", "_word", "_cjk_char", "_token"),
    "mdrecall.dreaming.concepts": ("_script_run",),
    "mdrecall.sources.redact": ("_GENERIC_WEBHOOK", "_QUERY_SECRET", "_LONG_FLAG", "_BEARER", "_ASSIGNMENT", "_WEBHOOK_URLS",
                                "_SHORT_FLAG", "_PRIVATE_KEY_BLOCK", "_PRIVATE_KEY_OPEN", "_URL_CREDENTIALS"),
}


def test_a_cold_keyword_search_leaves_out_what_it_does_not_use(tmp_path: Path) -> None:
    """Guards the start-up cost docs/benchmarks.md ("One-shot commands") measures, so that it cannot
    grow back unnoticed: what a built-in-only keyword search imports and compiles."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- We deploy on Tuesdays.\n", encoding="utf-8")
    store = tmp_path / "index.sqlite"
    env = {**subprocess_env(tmp_path / "home"), "MDRECALL_WARM": "off"}
    common = ["-w", str(ws), "-c", "provider=none", "-c", f"store.path={store}"]
    subprocess.run(
        [sys.executable, "-m", "mdrecall", "index", *common, "-q"], check=True, capture_output=True, env=env, timeout=120
    )
    code = (
        "import json, sys\nfrom mdrecall.cli import main\ncode = main(sys.argv[2:])\nlazy = json.loads(sys.argv[1])\n"
        "def at_import(x):\n    return not hasattr(x, 'cache_info') or x.cache_info().currsize > 0\n"
        "compiled = [f'{m}.{f}' for m, fs in lazy.items() if m in sys.modules for f in fs if at_import(getattr(sys.modules[m], f, None))]\n"
        "redact = sys.modules.get('mdrecall.sources.redact')\n"
        "compiled += [f'redact {k}' for k, _, p in getattr(redact, '_TOKEN_PATTERNS', []) if p.cache_info().currsize]\n"
        "built = sys.modules['mdrecall.config'].MemoryConfig.__pydantic_complete__\n"
        "print(json.dumps([code, sorted(sys.modules), compiled, built]), file=sys.stderr)\n"
    )
    argv = [sys.executable, "-c", code, json.dumps(LAZY_PATTERNS), "search", "deploy", *common]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    exit_code, modules, compiled, built = json.loads(proc.stderr.strip().splitlines()[-1])
    assert exit_code == 0 and "mdrecall.builtin.manager" in modules, proc.stderr  # it did search, in this process
    assert not set(NOT_FOR_A_KEYWORD_SEARCH) & set(modules), sorted(set(NOT_FOR_A_KEYWORD_SEARCH) & set(modules))
    assert compiled == [], compiled
    # The config came from the cache `index` left (config_cache.py): no pydantic validator was built.
    assert built is False and "pydantic.plugin._loader" not in modules
