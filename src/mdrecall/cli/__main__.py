"""``python -m mdrecall.cli`` = ``mdrecall``."""

from mdrecall.cli import main

raise SystemExit(main())
