"""A test hook for crash-safety tests: die abruptly at a labelled point of a sync or rebuild.

``MDRECALL_TEST_CRASH_AT=<label>`` (or ``<label>@<n>`` for the n-th time the point is passed) makes
the process call ``os._exit(CRASH_EXIT_CODE)`` there: no cleanup, no ``finally`` blocks, no flushing,
which is what ``kill -9`` does to the index. Unset (always, outside tests) it costs one dict lookup.

Labels: ``sync:locked``, ``index:file-written``, ``index:before-removals``, ``index:file-removed``,
``sync:before-finish``, ``rebuild:seeded``, ``rebuild:built``, ``swap:step``, ``swap:copied``.
"""

from __future__ import annotations

import os

ENV_VAR = "MDRECALL_TEST_CRASH_AT"
CRASH_EXIT_CODE = 86

_hits: dict[str, int] = {}


def crash_point(label: str) -> None:
    target = os.environ.get(ENV_VAR)
    if not target:
        return
    name, _, nth = target.partition("@")
    if name != label:
        return
    _hits[label] = _hits.get(label, 0) + 1
    if _hits[label] >= int(nth or 1):
        os._exit(CRASH_EXIT_CODE)
