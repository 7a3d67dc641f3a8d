"""The one extension mechanism: pluggy hooks, found through the ``mdrecall`` entry-point group.

A plugin is a module (or object) with functions marked ``@hookimpl``::

    from mdrecall.plugins import hookimpl

    @hookimpl
    def register_backends(register):
        register("mystore", create_manager)        # (workspace, config) -> MemorySearchManager

    @hookimpl
    def register_embedding_providers(register):
        register("myembed", create_provider)       # (config) -> EmbeddingProvider

and is installed with an entry point ``[project.entry-points.mdrecall] myplugin = "my_package.plugin"``.

mdrecall's own providers, backends, commands and features are plugins of exactly this kind, listed in
``DEFAULT_PLUGINS`` (as simonw/llm does).

The hooks (docs/architecture.md has the table):

* ``register_embedding_providers(register)``, ``register_backends(register)``: what ``provider`` and
  ``backend`` can name;
* ``register_commands(cli)``: subcommands of ``mdrecall``;
* ``register_tools(register)``: agent tools (``register(spec, handler, backends=None)``), offered by
  ``MemoryTools``/``MemoryCapability`` and over MCP next to ``memory_search``/``memory_get``/``memory_status``;
* ``register_recall_sources(register)``: entries that are not files (``ltm:<id>``), for dreaming;
* ``manager_opened(manager)``: attach features to every opened manager;
* ``entries_forgotten(manager, paths)``: a backend deleted entries for good; drop every copy kept elsewhere;
* ``auto_recall(manager, prompt, session_key)`` / ``auto_capture(manager, messages, session_key, success)``:
  what ``MemoryCapability`` injects before a prompt and learns from a finished turn.

How a broken plugin fails, always the same way: a plugin that cannot be imported, or whose hook
raises, contributes nothing; the failure is recorded in :func:`plugin_errors` (shown by
``mdrecall plugins``, ``mdrecall doctor`` and ``status()``), and a configuration that asks for
something no working plugin provides fails with a ConfigError that names the broken plugins.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    import click

    from mdrecall.contract import MemorySearchManager

log = logging.getLogger(__name__)

PROJECT = "mdrecall"
ENTRY_POINT_GROUP = "mdrecall"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: mdrecall's own plugins, registered before the installed ones.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "mdrecall.embeddings.plugin",
    "mdrecall.builtin.plugin",
    "mdrecall.backends.postgres.plugin",
    "mdrecall.backends.qmd.plugin",
    "mdrecall.backends.lancedb.plugin",
    "mdrecall.dreaming.plugin",
    "mdrecall.facts.plugin",
    "mdrecall.forget.plugin",
    "mdrecall.hosts.plugin",
)


class Hookspecs:
    @hookspec
    def register_embedding_providers(self, register: Callable[..., None]) -> None:
        """Add embedding providers: ``register(provider_id, factory, auto_priority=None)``.

        ``factory(config: MemoryConfig) -> EmbeddingProvider`` raises ProviderUnavailableError when
        the provider cannot be used here (missing key or package); ``auto_priority`` places it in the
        order ``provider: auto`` tries (0 = first)."""

    @hookspec
    def register_backends(self, register: Callable[..., None]) -> None:
        """Add memory backends: ``register(name, factory)``, ``factory(workspace: Path, config:
        MemoryConfig) -> MemorySearchManager``; ``backend: <name>`` selects it."""

    @hookspec
    def register_commands(self, cli: click.Group) -> None:
        """Add subcommands to the ``mdrecall`` command (a ``click.Group``)."""

    @hookspec
    def register_tools(self, register: Callable[..., None]) -> None:
        """Add agent tools: ``register(spec, handler, backends=None)``.

        ``spec`` is a :class:`mdrecall.agent.specs.ToolSpec` (name, description, JSON schema, and
        ``read_only``/``destructive``, which become the MCP annotations). ``handler(manager,
        arguments, session_key) -> dict`` gets arguments already checked against the schema (unknown
        keys, required keys, types, bounds, enums), raises ``ValueError`` for arguments that do not
        make sense (answered as ``{error, code: "invalid_arguments"}``) and returns a JSON-shaped
        dict; any other exception is answered as ``disabled: true``. ``backends``: the backend names
        the tool is offered for (None: every backend). A name already taken is an error."""

    @hookspec
    def register_recall_sources(self, register: Callable[..., None]) -> None:
        """Add entries that are not files to dreaming: ``register(scheme, reader)``.

        Hits whose path is ``<scheme>:<id>`` (LanceDB: ``ltm:<uuid>``) count as short-term material
        for recall tracking and promotion. ``reader(workspace: Path, path: str) -> str | None`` returns
        the entry's text as it is now, None when the entry no longer exists (so it is never promoted);
        raising means it cannot be read right now."""

    @hookspec
    def manager_opened(self, manager: MemorySearchManager) -> None:
        """``open_manager`` opened ``manager``: attach features to it (recall tracking)."""

    @hookspec
    def entries_forgotten(self, manager: MemorySearchManager, paths: Sequence[str]) -> None:
        """``manager`` deleted the entries cited by ``paths`` for good (``memory_forget``): drop every
        copy a feature keeps of them (dreaming's recall store and review queue)."""

    @hookspec
    def auto_recall(self, manager: MemorySearchManager, prompt: str, session_key: str | None) -> str | None:
        """Before a prompt is built (``MemoryCapability.auto_recall``): a ``<relevant-memories>`` block
        to prepend, or None/"" for nothing. Each plugin decides whether it serves ``manager``."""

    @hookspec
    def auto_capture(
        self, manager: MemorySearchManager, messages: Sequence[Mapping[str, object]], session_key: str | None, success: bool
    ) -> Mapping[str, object] | None:
        """After a turn (``MemoryCapability.auto_capture``): store what it stated durably; returns a
        report (``{captured: [...], ...}``) or None when this plugin does not capture for ``manager``."""


@dataclass(frozen=True, slots=True)
class PluginInfo:
    name: str
    hooks: tuple[str, ...]
    error: str | None = None


pm = pluggy.PluginManager(PROJECT)
pm.add_hookspecs(Hookspecs)

_lock = threading.RLock()
_loaded = False
_errors: dict[str, str] = {}
#: Bumped whenever plugins change, so registries built from hooks know to rebuild.
_generation = 0


def load_plugins() -> None:
    """Register the default plugins and every installed entry point, once per process."""
    global _loaded, _generation
    with _lock:
        if _loaded:
            return
        _loaded = True
        for module_name in DEFAULT_PLUGINS:
            pm.register(importlib.import_module(module_name), name=module_name)
        for ep in _installed_entry_points():
            if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            try:
                pm.register(ep.load(), name=ep.name)
            except Exception as exc:  # a broken plugin must not break mdrecall
                _errors[ep.name] = f"failed to load ({ep.value}): {type(exc).__name__}: {exc}"
                log.warning("mdrecall: plugin %s %s", ep.name, _errors[ep.name])
        _generation += 1


def _installed_entry_points() -> Sequence[EntryPoint | DeclaredEntryPoint]:
    """The installed entry points of the ``mdrecall`` group, in the order ``importlib.metadata`` lists them.

    Listing them through ``importlib.metadata`` imports it (~10 ms of a one-shot command's ~300 ms) and
    parses every installed distribution's metadata (~10 ms more in a venv of 150 packages). On the
    ordinary layout (``*.dist-info`` / ``*.egg-info`` folders in ``sys.path`` directories, found by the
    standard finder) :func:`_declared_entry_points` reads the same ``entry_points.txt`` files by the
    same rules instead; anything else is left to ``importlib.metadata``, exactly as before."""
    declared = _declared_entry_points(ENTRY_POINT_GROUP)
    if declared is not None:
        return declared
    from importlib.metadata import entry_points

    return list(entry_points(group=ENTRY_POINT_GROUP))


@dataclass(frozen=True, slots=True)
class DeclaredEntryPoint:
    """An entry point as a distribution's ``entry_points.txt`` declares it (the part of
    ``importlib.metadata.EntryPoint`` that loading a plugin uses)."""

    name: str
    value: str

    def load(self) -> object:
        """The object ``value`` names: ``module`` or ``module:attribute.path`` (extras ignored)."""
        spec = self.value.split("[", 1)[0] if self.value.endswith("]") else self.value
        module, colon, attrs = (part.strip() for part in spec.partition(":"))
        if not module or (colon and not attrs):
            raise ValueError(f"{self.value!r} is not 'module' or 'module:attribute'")
        found: object = importlib.import_module(module)
        for attr in filter(None, attrs.split(".")):
            found = getattr(found, attr)
        return found


def _declared_entry_points(group: str) -> list[DeclaredEntryPoint] | None:
    """The entry points of ``group`` that ``importlib.metadata.entry_points(group=...)`` would list,
    read as it reads them: the ``*.dist-info`` / ``*.egg-info`` folders of each ``sys.path`` directory
    in turn, the first distribution of each normalized name only (a later one of the same name is
    shadowed), each one's ``entry_points.txt`` read by its rules (stripped lines; ``#`` comments;
    ``[section]`` headers; ``name = value``). None where only ``importlib.metadata`` can say:
    distributions that may come from elsewhere (another finder on ``sys.meta_path``, a zip or an
    egg on the path), a file that cannot be read or decoded, or a line of the group it would fail on."""
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and hasattr(finder, "find_distributions"):
            return None
    found: list[DeclaredEntryPoint] = []
    seen: set[str] = set()
    for entry in sys.path:
        root = entry or "."
        try:
            names = os.listdir(root)
        except NotADirectoryError:
            return None  # a zip file on the path
        except OSError:
            if os.path.exists(root):
                return None
            continue  # importlib.metadata skips a missing entry as well
        if root.lower().rstrip("/\\").endswith(".egg"):
            return None  # an unpacked egg: its EGG-INFO is read too
        # importlib.metadata groups a directory's distributions by normalized name, in listing order.
        infos: dict[str, list[str]] = {}
        for name in names:
            low = name.lower()
            if low.endswith((".dist-info", ".egg-info")):
                infos.setdefault(_normalized(low.rpartition(".")[0].partition("-")[0]), []).append(name)
        for folders in infos.values():
            for folder in folders:
                # The name a distribution is told apart by: its folder's, or (an upper-case suffix, no
                # name before the version) its metadata's, which only importlib.metadata reads.
                stem, suffix = os.path.splitext(folder)
                normalized = _normalized(stem.partition("-")[0]) if suffix in (".dist-info", ".egg-info") else ""
                if not normalized:
                    return None
                if normalized in seen:
                    continue  # shadowed by a distribution of the same name before it on the path
                seen.add(normalized)
                declared = _declared_in(os.path.join(root, folder), group)
                if declared is None:
                    return None
                found.extend(declared)
    return found


def _normalized(name: str) -> str:
    """A distribution name as importlib.metadata compares them (PEP 503, dashes as underscores)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _declared_in(folder: str, group: str) -> list[DeclaredEntryPoint] | None:
    """``group``'s entry points in one distribution's ``entry_points.txt`` ([] when it has none)."""
    try:
        with open(os.path.join(folder, "entry_points.txt"), "rb") as file:
            raw = file.read()
    except (FileNotFoundError, NotADirectoryError):
        return []  # no entry points (an egg-info may be a plain file): importlib.metadata skips it too
    except OSError:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None  # importlib.metadata would fail on it: let it
    if group not in text:
        return []
    found: list[DeclaredEntryPoint] = []
    section: str | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group:
            name, equals, value = line.partition("=")
            if not equals:
                return None  # importlib.metadata raises on such a line: let it
            found.append(DeclaredEntryPoint(name.strip(), value.strip()))
    return found


def reload_plugins() -> None:
    """Forget every plugin and find them again (after installing a package into a running process)."""
    global _loaded, _generation
    with _lock:
        for name, _plugin in list(pm.list_name_plugin()):
            pm.unregister(name=name)
        _errors.clear()
        _loaded = False
        _generation += 1
    load_plugins()


def register_plugin(plugin: object, name: str | None = None) -> str:
    """Register a plugin object in this process (tests, embedding applications); returns its name."""
    global _generation
    load_plugins()
    with _lock:
        registered = pm.register(plugin, name=name)
        _generation += 1
    return registered or (name or str(id(plugin)))


def unregister_plugin(name: str) -> None:
    global _generation
    with _lock:
        if pm.get_plugin(name) is not None:
            pm.unregister(name=name)
        _errors.pop(name, None)
        _generation += 1


def generation() -> int:
    load_plugins()
    return _generation


def call_each(hook: str, **kwargs: Any) -> Iterator[tuple[str, Any]]:
    """Call one hook on each plugin in turn: (plugin name, result). A plugin whose hook raises is
    skipped and its error recorded, so one broken plugin cannot take the others down."""
    load_plugins()
    caller = getattr(pm.hook, hook)
    # Registration order (pluggy lists them so; it calls them last-first): the defaults first, so a later
    # plugin registering the same name (a backend, a provider, a test double) is the one that counts.
    for impl in caller.get_hookimpls():
        try:
            result = impl.function(**kwargs)
        except Exception as exc:
            _errors[impl.plugin_name] = f"hook {hook} failed: {type(exc).__name__}: {exc}"
            log.warning("mdrecall: plugin %s %s", impl.plugin_name, _errors[impl.plugin_name])
            continue
        yield impl.plugin_name, result


def plugin_errors() -> dict[str, str]:
    """Plugins that failed to load or whose hooks raised: name -> what happened."""
    load_plugins()
    return dict(_errors)


def broken_plugins_note() -> str:
    """A sentence to append to "unknown ..." errors, naming plugins that failed; "" when none did."""
    errors = plugin_errors()
    if not errors:
        return ""
    return " Plugins that failed: " + "; ".join(f"{name}: {why}" for name, why in sorted(errors.items())) + "."


def list_plugins() -> list[PluginInfo]:
    load_plugins()
    infos = [
        PluginInfo(name, tuple(sorted(h.name for h in pm.get_hookcallers(plugin) or [])), _errors.get(name))
        for name, plugin in pm.list_name_plugin()
    ]
    known = {i.name for i in infos}
    infos.extend(PluginInfo(name, (), error) for name, error in _errors.items() if name not in known)
    return sorted(infos, key=lambda i: (i.name not in DEFAULT_PLUGINS, i.name))
