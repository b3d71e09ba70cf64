"""The ``twinlog`` command line: the top floor, the one place that may import the server,
the client, the Spark connector and (from a source checkout) the benchmarks.
"""
