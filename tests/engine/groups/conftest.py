"""Tests of ``twinlog.engine.groups``: consumer group membership at its coordinator
(assignor, reconciliation, expiry, static members, fencing of commits by generation)."""
