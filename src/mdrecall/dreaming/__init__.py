"""Dreaming: short-term recall tracking and reviewed promotion into MEMORY.md.

Every search records which facts of daily notes and transcripts it surfaced (recording.py, into the
store of store.py); facts that keep coming back across questions and days score high (scoring.py) and
are staged for review, then written to MEMORY.md with provenance (promotion.py); ``mdrecall dream``
runs the whole pass (sweep.py). See docs/dreaming.md.
"""

from mdrecall.dreaming.config import DreamingConfig, dreaming_config, parse_dreaming_config
from mdrecall.dreaming.promotion import ApplyResult, StageResult, apply, explain, list_candidates, stage
from mdrecall.dreaming.recording import RecordSummary, install_recall_tracking, record_grounding, record_recalls
from mdrecall.dreaming.scoring import WEIGHTS, Components, Evaluation, evaluate, rank
from mdrecall.dreaming.store import RecallStore
from mdrecall.dreaming.sweep import DreamReport, run_dream

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
