"""Tests of ``twinlog.engine.log``: the segmented data log (append, read, indexes, recovery
of torn tails, retention, truncation, compaction). Helpers: ``tests/support/log_support.py``."""
