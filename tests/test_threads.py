"""Thread discipline: one BLAS thread once mdrecall computes anything; a known count for documents."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _run(code: str, **env: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                          env={**os.environ, **env}).stdout.strip()


def test_blas_runs_one_thread_after_the_first_vector_search() -> None:
    if len(os.sched_getaffinity(0)) < 2:
        # OpenBLAS starts no more threads than the CPUs it may use: with one, there is nothing to cut.
        pytest.skip("needs two CPUs to see BLAS start more than one thread")
    code = (
        "import numpy as np; from threadpoolctl import threadpool_info\n"
        "before = max(i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas')\n"
        "from mdrecall.search.vector import InProcessVectors\n"
        "from mdrecall.store.db import IndexDB, StoreOptions\n"
        "import tempfile, pathlib\n"
        "db = IndexDB(pathlib.Path(tempfile.mkdtemp()) / 'i.sqlite', StoreOptions())\n"
        "InProcessVectors().search(db, np.ones(4, dtype=np.float32), 5, None)\n"
        "after = max(i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas')\n"
        "print(before, after)"
    )
    before, after = _run(code, OPENBLAS_NUM_THREADS="2").split()
    assert (before, after) == ("2", "1")


def test_document_workers_follow_the_environment() -> None:
    code = "from mdrecall import threads; print(threads.document_workers())"
    assert _run(code, MDRECALL_THREADS="3") == "3"
    default = int(_run(code, MDRECALL_THREADS=""))
    assert 1 <= default <= 4
