"""``python -m memsim``: the same command line as ``memsim``."""

from memsim.analysis.cli import main

raise SystemExit(main())
