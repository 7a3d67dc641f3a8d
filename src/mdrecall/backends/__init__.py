"""Which MemorySearchManager answers for a workspace: ``config.backend`` names it, plugins provide it.

``builtin`` (the SQLite engine) is registered by :mod:`mdrecall.builtin.plugin`; other backends come
from plugins through the ``register_backends`` hook (see :mod:`mdrecall.plugins` and
docs/backends.md). :func:`open_manager` is the one way to open a workspace's memory.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdrecall import plugins
from mdrecall.errors import ConfigError, MdrecallError

if TYPE_CHECKING:
    # Not at run time: config.py imports the backends' settings modules (mdrecall.backends.<name>.settings),
    # so this package must be importable before config is.
    from mdrecall.config import MemoryConfig
    from mdrecall.contract import MemorySearchManager

BackendFactory = Callable[[Path, "MemoryConfig"], "MemorySearchManager"]

_lock = threading.Lock()
_factories: dict[str, BackendFactory] = {}
_generation = -1


def _current() -> dict[str, BackendFactory]:
    global _generation, _factories
    current = plugins.generation()
    with _lock:
        if _generation != current:
            found: dict[str, BackendFactory] = {}

            def register(name: str, factory: BackendFactory) -> None:
                if not name or not callable(factory):
                    raise ValueError(f"invalid backend registration {name!r}")
                found[name] = factory

            for _name, _ in plugins.call_each("register_backends", register=register):
                pass
            _factories, _generation = found, current
        return _factories


def known_backends() -> list[str]:
    """Every backend name this process can open."""
    return sorted(_current())


def get_backend_factory(name: str) -> BackendFactory:
    """The factory for backend ``name``; ConfigError naming the known ones (and broken plugins) otherwise."""
    factory = _current().get(name)
    if factory is None:
        raise ConfigError(
            f"unknown memory backend {name!r}; known: {', '.join(known_backends())}. "
            "Other backends are installed as plugins (docs/backends.md)." + plugins.broken_plugins_note()
        )
    return factory


def open_manager(
    workspace: str | os.PathLike[str],
    config: Mapping[str, Any] | MemoryConfig | None = None,
    *,
    use_global_config: bool = True,
) -> MemorySearchManager:
    """Open the memory of one workspace. ``config`` is the YAML memory-section mapping (merged over
    the config files) or a ready ``MemoryConfig``. Plugins' ``manager_opened`` hooks then attach their
    features (recall tracking for promotion)."""
    root = Path(workspace).expanduser()
    if not root.is_dir():
        raise MdrecallError(f"workspace {root} is not a directory")
    root = Path(os.path.abspath(root))
    from mdrecall.config import MemoryConfig, load_config

    cfg = config if isinstance(config, MemoryConfig) else load_config(root, config, use_global=use_global_config)
    manager = get_backend_factory(cfg.backend)(root, cfg)
    try:
        for _name, _ in plugins.call_each("manager_opened", manager=manager):
            pass
    except BaseException:
        manager.close()
        raise
    return manager


__all__ = ["BackendFactory", "get_backend_factory", "known_backends", "open_manager"]
