from mdrecall.cli import main

raise SystemExit(main())
