"""How cluster metadata scales with partitions: ``python -m bench.metadata`` (``runner``)."""
