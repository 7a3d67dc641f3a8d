"""The layering docs/architecture.md describes, checked on the source (imports inside functions count).

* No import cycle between modules.
* The core (everything but the shells and the features) never imports a shell (``cli``, ``mcp``,
  ``ui``, any ``cli.py``) or a feature (``agent``, ``dreaming``, ``facts``, ``forget``, ``hosts``), except that a ``plugin.py`` is
  wiring (a backend's): it may import the feature and shell modules whose tools, prompts and commands
  it registers, and no core module imports it (only the plugin manager loads it, by name).
* Features never import a shell, except their ``plugin.py`` wiring, which registers commands.
* A module over ``MAX_LINES`` says at its top why it is long.
* The public API (``mdrecall.__all__``) changes only on purpose.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import mdrecall

PACKAGE = Path(mdrecall.__file__).parent
SHELLS = ("mdrecall.cli", "mdrecall.mcp", "mdrecall.ui", "mdrecall.__main__")
FEATURES = ("mdrecall.agent", "mdrecall.dreaming", "mdrecall.facts", "mdrecall.forget", "mdrecall.hosts")
MAX_LINES = 500
LONG_MODULE_NOTE = "Why this module is long:"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.AST, module: str) -> Iterator[str]:
    """Every mdrecall module ``module`` imports at run time, at any depth (not ``if TYPE_CHECKING``)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if _is_type_checking_block(child):
                continue
            if isinstance(child, ast.Import):
                yield from (a.name for a in child.names if a.name.startswith("mdrecall"))
            elif isinstance(child, ast.ImportFrom):
                if child.level:  # relative import
                    base = module.rsplit(".", child.level - (1 if MODULES[module].name == "__init__.py" else 0))[0]
                    target = f"{base}.{child.module}" if child.module else base
                else:
                    target = child.module or ""
                if target.startswith("mdrecall"):
                    yield target
                    # "from mdrecall.x import y" may name a module y
                    for alias in child.names:
                        if f"{target}.{alias.name}" in MODULES:
                            yield f"{target}.{alias.name}"
            stack.append(child)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = set()
        for target in _imports(tree, name):
            # importing mdrecall.a.b imports the package mdrecall.a too; only edges to real modules count
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


GRAPH = _graph()


def _is_shell(name: str) -> bool:
    return name.startswith(SHELLS) or name.rsplit(".", 1)[-1] == "cli"


def _is_feature(name: str) -> bool:
    return name.startswith(FEATURES)


def _is_core(name: str) -> bool:
    return not (_is_shell(name) or _is_feature(name))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            # A package's __init__ re-exporting its own submodules is not a cycle of behaviour.
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _without_package_reexports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Drop edges from a package's ``__init__`` to its own submodules (re-exports): Python imports
    the package first anyway, so they close no loop of behaviour. Everything else stays."""
    out = {}
    for name, targets in graph.items():
        is_package = MODULES[name].name == "__init__.py"
        out[name] = {t for t in targets if not (is_package and t.startswith(name + "."))}
    return out


def test_the_checker_sees_imports_inside_functions() -> None:
    # builtin.manager imports builtin.status inside status(): the graph must have that edge.
    assert "mdrecall.builtin.status" in GRAPH["mdrecall.builtin.manager"]
    assert "mdrecall.mcp.server" in GRAPH["mdrecall.cli.mcp"]


def test_no_import_cycles() -> None:
    assert _cycles(_without_package_reexports(GRAPH)) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _is_plugin_wiring(name: str) -> bool:
    return name.endswith(".plugin")


def test_core_never_imports_a_shell_or_a_feature() -> None:
    bad = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if _is_core(name) and not _is_plugin_wiring(name)
        for target in targets
        if not _is_core(target)
    )
    assert bad == []


def test_no_core_module_imports_a_plugins_wiring() -> None:
    # The exemption above must not become a back door from the core into the features.
    bad = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if _is_core(name)
        for target in targets
        if _is_plugin_wiring(target) and _is_core(target)
    )
    assert bad == []


def test_features_never_import_a_shell_except_their_plugin_wiring() -> None:
    bad = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if _is_feature(name) and not _is_plugin_wiring(name)
        for target in targets
        if _is_shell(target)
    )
    assert bad == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_long_modules_say_why(name: str) -> None:
    text = MODULES[name].read_text(encoding="utf-8")
    if text.count("\n") > MAX_LINES:
        head = ast.get_docstring(ast.parse(text)) or ""
        assert LONG_MODULE_NOTE in head, f"{name} has {text.count(chr(10))} lines and no '{LONG_MODULE_NOTE}' note"


def test_the_builtin_manager_stays_a_facade() -> None:
    assert MODULES["mdrecall.builtin.manager"].read_text(encoding="utf-8").count("\n") <= 450


PUBLIC_API = [
    "ConfigError",
    "EmbeddingError",
    "Freshness",
    "ManagerBase",
    "MdrecallError",
    "MemoryConfig",
    "MemorySearchManager",
    "PathError",
    "ProbeResult",
    "ReadResult",
    "Remembered",
    "SearchHit",
    "SearchRequest",
    "SearchResponse",
    "SkippedFile",
    "Status",
    "StoreError",
    "SyncProgress",
    "SyncReport",
    "__version__",
    "fact_history",
    "load_config",
    "open_manager",
    "remember",
]


def test_public_api_is_frozen() -> None:
    # Changing this list is a decision about the public API: update docs/architecture.md with it.
    assert sorted(mdrecall.__all__) == PUBLIC_API
    for name in PUBLIC_API:
        assert getattr(mdrecall, name) is not None
