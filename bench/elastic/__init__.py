"""The elastic cluster's figures: ``python -m bench.elastic`` (``runner``)."""
