"""``python -m mdrecall.mcp`` = ``mdrecall mcp``."""

import sys

from mdrecall.cli import main

raise SystemExit(main(["mcp", *sys.argv[1:]]))
