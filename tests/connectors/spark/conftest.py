"""Tests of ``twinlog.connectors.spark``: PySpark in ``local[2]`` against a real server
(fixtures ``spark``, ``server``, ``remote`` from ``tests/support/spark_support.py``, loaded
by ``tests/conftest.py``)."""
