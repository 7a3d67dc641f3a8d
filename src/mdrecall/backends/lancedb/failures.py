"""LanceDB's failures, classified and turned into mdrecall's: which errors are commit conflicts to
retry, a version's files cleaned up under a reader, a table folder with no manifest, a missing
full-text index; and :func:`lance_errors`, which makes every other failure of LanceDB or of the
object store under it one StoreError line."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from mdrecall.errors import MdrecallError, StoreError


class _Located(Protocol):
    uri: str


def is_conflict(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "conflict" in text or "retryable" in text or "concurrent" in text


def is_missing_file(exc: BaseException) -> bool:
    # A reader on a version whose files another process just cleaned up: read the latest again.
    text = str(exc).lower()
    return "not found" in text or "no such file" in text or "does not exist" in text


def is_missing_table(exc: BaseException) -> bool:
    """LanceDB's answer for a table folder with no manifest (never created, or its first commit cut)."""
    return isinstance(exc, ValueError) and "was not found" in str(exc)


def is_missing_fts(exc: BaseException) -> bool:
    """No full-text index yet ("Cannot perform full text search unless an INVERTED index has been created")."""
    return "INVERTED index has been created" in str(exc)


# Where in LanceDB's Rust sources an error was raised: "/root/.cargo/.../commit.rs:1100:25" in
# messages, "location: Location { file: ..., line: .., column: .. }, backtrace: ..." in debug dumps.
_RUST_LOCATION = re.compile(r",?\s*(?:/\S+\.rs:\d+:\d+|location: Location \{[^}]*\}|backtrace: \w+)")


def short_error(exc: BaseException) -> str:
    """LanceDB's error on one line, without Rust source paths, at most 400 characters: its start
    (what failed) and its end (why: "503 Service Unavailable", "error sending request")."""
    text = _RUST_LOCATION.sub("", " ".join(str(exc).split())) or type(exc).__name__
    return text if len(text) <= 400 else f"{text[:180]} ... {text[-215:]}"


_P = ParamSpec("_P")
_R = TypeVar("_R")
_S = TypeVar("_S", bound=_Located)


def lance_errors(what: str) -> Callable[[Callable[Concatenate[_S, _P], _R]], Callable[Concatenate[_S, _P], _R]]:
    """Every failure of LanceDB or of the object store under it, as a one-line StoreError (mdrecall's
    own errors pass through): the CLI prints it and exits 1, the tools answer it, nothing prints a
    traceback."""

    def decorate(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
        @functools.wraps(method)
        def wrapper(store: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return method(store, *args, **kwargs)
            except MdrecallError:
                raise
            except Exception as exc:
                raise StoreError(f"LanceDB {what} failed ({store.uri}): {short_error(exc)}") from exc

        return wrapper

    return decorate
