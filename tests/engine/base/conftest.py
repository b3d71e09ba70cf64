"""Tests of ``twinlog.engine.base``: errors, failpoints, CRC-32C, atomic files, config key names."""
