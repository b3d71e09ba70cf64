"""``python -m bench.cluster``: see ``bench.cluster.runner``."""

from bench.cluster.runner import main

raise SystemExit(main())
