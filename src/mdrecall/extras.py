"""The install command a "missing package" message prints, as it runs for this installation.

mdrecall is installed from a checkout, a wheel or a Git URL, not from a package index, so
``pip install 'mdrecall[ui]'`` fails as printed. The hint names where this installation came from
(its ``direct_url.json``: ``pip install -e '/src/mdrecall[ui]'``, ``pip install 'mdrecall[ui] @
file:///…whl'``) and the installer that reaches this interpreter (``pip`` when the one on PATH is
this environment's, else ``python -m pip`` by absolute path, ``uv pip`` where there is no pip).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from urllib.parse import unquote, urlparse


def _origin() -> tuple[str | None, bool, str | None]:
    """(local source folder, editable, other URL) of the installed mdrecall; (None, False, None)
    when it came from an index or cannot tell."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        raw = distribution("mdrecall").read_text("direct_url.json")
    except (ImportError, PackageNotFoundError, OSError):
        return None, False, None
    if not raw:
        return None, False, None
    try:
        info = json.loads(raw)
    except ValueError:
        return None, False, None
    url = str(info.get("url") or "")
    editable = bool((info.get("dir_info") or {}).get("editable"))
    parsed = urlparse(url)
    if parsed.scheme == "file" and "archive_info" not in info and "vcs_info" not in info:
        return unquote(parsed.path), editable, None
    if "vcs_info" in info:
        vcs = info["vcs_info"].get("vcs", "git")
        return None, False, f"{vcs}+{url}"
    return None, False, url or None


def install_command() -> str:
    """``pip install``, or what stands for it, for the environment mdrecall runs in."""
    import importlib.util

    pip = shutil.which("pip")
    if pip and os.path.realpath(pip).startswith(os.path.join(os.path.realpath(sys.prefix), "")):
        return "pip install"
    if importlib.util.find_spec("pip") is None and shutil.which("uv"):
        return f"uv pip install --python {shlex.quote(sys.executable)}"
    return f"{shlex.quote(sys.executable)} -m pip install"


def install_hint(extra: str) -> str:
    """``pip install …`` for mdrecall's optional dependencies ``extra`` (e.g. ``ui``, ``mcp``, ``local``)."""
    folder, editable, url = _origin()
    if folder is not None:
        target = ("-e " if editable else "") + shlex.quote(f"{folder}[{extra}]")
    elif url is not None:
        target = shlex.quote(f"mdrecall[{extra}] @ {url}")
    else:
        target = shlex.quote(f"mdrecall[{extra}]")
    return f"{install_command()} {target}"


def package_hint(*packages: str, no_deps: bool = False) -> str:
    """``pip install PACKAGES`` (from the package index) into the environment mdrecall runs in."""
    flags = " --no-deps" if no_deps else ""
    return f"{install_command()}{flags} " + " ".join(shlex.quote(p) for p in packages)


__all__ = ["install_command", "install_hint", "package_hint"]
