"""``backend: qmd``: memory search answered by QMD (npm ``@tobilu/qmd``), kept warm over MCP stdio.

Needs the ``qmd`` program (``scripts/install-qmd.sh`` installs it into ``.tools/qmd/``) and no
Python package beyond mdrecall's core; registered by :mod:`mdrecall.backends.qmd.plugin`. See
docs/qmd.md: process model, modes and models, score calibration, the fallback to the builtin engine
and its retry.

This package imports nothing: ``mdrecall.config`` imports its ``settings`` module while
``mdrecall.backends`` is still initialising.
"""
