"""``python -m bench.cluster``: the cluster figures (CLUSTER.md §5), measured in one run."""
