"""``python -m bench``: the end-to-end benchmark runner (``twinlog bench`` runs the same)."""

from bench.e2e.runner import main

raise SystemExit(main())
