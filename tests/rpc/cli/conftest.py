"""Tests of ``twinlog.rpc.cli``: the ``twinlog`` command as a user types it, against a real
server process."""
