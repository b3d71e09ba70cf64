"""``python -m bench.elastic``: see ``bench.elastic.runner``."""

from bench.elastic.runner import main

raise SystemExit(main())
