"""The ``twinlog`` command line: the top floor, the one place that may import the server,
the client, the Spark connector and (from a source checkout) the benchmarks.

One module per command (``serve``, ``produce``, ``consume``, ``topics``, ``groups``,
``txn``, ``dump``, ``cluster*``, ``zookeeper``) and the demos (``demo*``);
``local_zookeeper`` starts a ZooKeeper JVM for trying a cluster out (``twinlog zookeeper
start``, ``cluster up``). Nothing imports it; docs/cli.md is its manual.
"""
