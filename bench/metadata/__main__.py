"""``python -m bench.metadata``: see ``bench.metadata.runner``."""

from bench.metadata.runner import main

raise SystemExit(main())
