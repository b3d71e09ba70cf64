"""The lowest floor: typed errors, failpoints, CRC-32C, atomic small files, plain value types.

Also the small tools every floor shares: units, host:port addresses, bounded caches,
latency histograms, fsync timing, the one backoff policy of every retry (``backoff``).
It imports nothing of twinlog, and every other floor uses it: the error classes here
are the ones a client sees, in process or over the network (``docs/errors.md``), and
the value types (``TopicPartition``, ``FetchResult``, ...) are what the broker's API
takes and returns.
"""
