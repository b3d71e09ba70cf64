"""``python -m bench.scale``: many producers committing small transactions at once."""
