"""Verified forgetting: remove lines, a file, an entry or a text from memory and from every store
derived from it, then check byte by byte that no copy is left (docs/forgetting.md).

::

    from mdrecall.forget import forget, plan_forget

    plan = plan_forget(manager, "memory/2026-03-02.md#L6")     # what would go, and its token
    report = forget(manager, "memory/2026-03-02.md#L6", confirm=plan.token)
    report.verified, [s.to_dict() for s in report.stores]

The modules: ``plan`` (targets -> lines), ``sources`` (the files), ``index`` (the builtin's SQLite
indexes), ``postgres``, ``lance``, ``dreams`` (recall store, review queue), ``verify`` (the byte
scan), ``run`` (the order of it all), ``tools`` + ``plugin`` (the ``memory_forget_lines`` agent tool).

Names load on first use: the plugin module is imported by every mdrecall process.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mdrecall.forget.plan import ForgetPlan, ForgetTargetError, plan_forget
    from mdrecall.forget.report import ConfirmationRequired, ForgetReport, NothingToForget, StoreReport
    from mdrecall.forget.run import apply_plan, forget
    from mdrecall.forget.selection import FileSelection, SelectedLine

_EXPORTS = {
    "FileSelection": "selection",
    "ForgetPlan": "plan",
    "ForgetTargetError": "plan",
    "SelectedLine": "selection",
    "plan_forget": "plan",
    "ConfirmationRequired": "report",
    "ForgetReport": "report",
    "NothingToForget": "report",
    "StoreReport": "report",
    "apply_plan": "run",
    "forget": "run",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "ConfirmationRequired",
    "FileSelection",
    "ForgetPlan",
    "ForgetReport",
    "ForgetTargetError",
    "NothingToForget",
    "SelectedLine",
    "StoreReport",
    "apply_plan",
    "forget",
    "plan_forget",
]
