"""`python -m app` starts the GUI; `python -m app <command>` runs a tool."""

from app.cli import main

raise SystemExit(main())
