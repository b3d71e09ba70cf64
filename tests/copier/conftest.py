"""Tests of ``twinlog.copier``: APPLY_COMMIT/APPLY_ABORT, the recovery table (every row),
a hypothesis state machine, real SIGKILLs mid-copy, and memory while applying 1 GiB."""
