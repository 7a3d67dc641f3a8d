"""Registry of memory backends other than the builtin SQLite one.

``config.backend`` names the backend; ``open_manager`` asks :func:`get_backend_factory` for any name
other than ``"builtin"``. A backend factory is ``(workspace: Path, config: MemoryConfig) ->
MemorySearchManager`` (``search``, ``read_file``, ``status``, ``sync``, probes, ``close``).

Third-party packages add a backend without touching mdrecall, through the ``mdrecall.backends``
entry-point group::

    [project.entry-points."mdrecall.backends"]
    mystore = "mystore_mdrecall:create_manager"

Code that lives in the same process can call :func:`register_backend` instead.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable

from mdrecall.errors import ConfigError

BackendFactory = Callable[[Path, Any], Any]

ENTRY_POINT_GROUP = "mdrecall.backends"
BUILTIN = "builtin"

_REGISTERED: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Register (or replace) a backend factory in this process; wins over an entry point of the same name."""
    if not name or name == BUILTIN:
        raise ValueError(f"invalid backend name {name!r}")
    _REGISTERED[name] = factory


def unregister_backend(name: str) -> None:
    _REGISTERED.pop(name, None)


def _entry_point(name: str) -> Any | None:
    # Read entry points on every lookup (cheap) so a package installed while running is found.
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep
    return None


def known_backends() -> list[str]:
    """Every backend name this process can open: builtin, registered and installed ones."""
    return sorted({BUILTIN, *_REGISTERED, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})


def get_backend_factory(name: str) -> BackendFactory:
    """The factory for backend ``name``; ConfigError naming the known backends when there is none.

    A plugin that fails to import also gives ConfigError, with the import error in the message, so a
    broken third-party package reads as a configuration problem, not a crash inside mdrecall.
    """
    if name in _REGISTERED:
        return _REGISTERED[name]
    ep = _entry_point(name)
    if ep is None:
        raise ConfigError(
            f"unknown memory backend {name!r}; known: {', '.join(known_backends())}. "
            f"Third-party backends register through the {ENTRY_POINT_GROUP!r} entry-point group."
        )
    try:
        factory = ep.load()
    except Exception as exc:
        raise ConfigError(f"memory backend plugin {name!r} ({ep.value}) failed to load: {exc}") from exc
    if not callable(factory):
        raise ConfigError(f"memory backend plugin {name!r} ({ep.value}) is not callable")
    return factory


__all__ = [
    "BUILTIN",
    "BackendFactory",
    "ENTRY_POINT_GROUP",
    "get_backend_factory",
    "known_backends",
    "register_backend",
    "unregister_backend",
]
