"""Benchmarks run with pytest-benchmark: ``make bench`` or
``pytest bench --benchmark-enable``. They are not tests: nothing here fails
because a machine is slow; each benchmark checks only its own output."""
