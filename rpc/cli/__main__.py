"""``python -m twinlog.rpc.cli``: the same as the ``twinlog`` command."""

from twinlog.rpc.cli.main import main

raise SystemExit(main())
