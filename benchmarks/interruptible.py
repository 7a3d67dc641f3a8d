"""A benchmark's entry point that stops on Ctrl-C with one line and exit status 130, not a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn


def run(main: Callable[[], int], lost: str = "no figures printed") -> NoReturn:
    """``raise SystemExit(main())``; on Ctrl-C, ``interrupted: {lost}`` on stderr and exit 130."""
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        print(f"interrupted: {lost}", file=sys.stderr)
        raise SystemExit(130) from None
