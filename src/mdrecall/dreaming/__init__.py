"""Dreaming: short-term recall tracking and reviewed promotion into MEMORY.md.

Every search records which facts of daily notes and transcripts it surfaced (recording.py, into the
store of store.py); facts that keep coming back across questions and days score high (scoring.py) and
are staged for review, then written to MEMORY.md with provenance (promotion.py); ``mdrecall dream``
runs the whole pass (sweep.py). See docs/dreaming.md.

The names below are loaded on first use: every opened manager imports this package (its plugin
installs recall tracking), and promotion and the sweep cost a one-shot search ~40 ms of imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mdrecall.dreaming.config import DreamingConfig, dreaming_config, parse_dreaming_config
    from mdrecall.dreaming.promotion import ApplyResult, StageResult, apply, explain, list_candidates, stage
    from mdrecall.dreaming.recording import RecordSummary, install_recall_tracking, record_grounding, record_recalls
    from mdrecall.dreaming.scoring import WEIGHTS, Components, Evaluation, evaluate, rank
    from mdrecall.dreaming.store import RecallStore
    from mdrecall.dreaming.sweep import DreamReport, run_dream

#: Public name -> the module that defines it.
_EXPORTS = {
    "DreamingConfig": "config",
    "dreaming_config": "config",
    "parse_dreaming_config": "config",
    "ApplyResult": "promotion",
    "StageResult": "promotion",
    "apply": "promotion",
    "explain": "promotion",
    "list_candidates": "promotion",
    "stage": "promotion",
    "RecordSummary": "recording",
    "install_recall_tracking": "recording",
    "record_grounding": "recording",
    "record_recalls": "recording",
    "WEIGHTS": "scoring",
    "Components": "scoring",
    "Evaluation": "scoring",
    "evaluate": "scoring",
    "rank": "scoring",
    "RecallStore": "store",
    "DreamReport": "sweep",
    "run_dream": "sweep",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "ApplyResult",
    "Components",
    "DreamReport",
    "DreamingConfig",
    "Evaluation",
    "RecallStore",
    "RecordSummary",
    "StageResult",
    "WEIGHTS",
    "apply",
    "dreaming_config",
    "evaluate",
    "explain",
    "install_recall_tracking",
    "list_candidates",
    "parse_dreaming_config",
    "rank",
    "record_grounding",
    "record_recalls",
    "run_dream",
    "stage",
]
