"""Tests of ``twinlog.journal``: the local data journal's format, group commit, and its
reverse-linked entries. Helpers: ``tests/support/copier_support.py``."""
