"""twinlog's engine: the floors a broker is made of, each a folder (lowest first).

``base`` (errors, failpoints, CRC-32C, atomic files, value types) <- ``records`` (the
batch format) <- ``log`` (the data log) <- [``twinlog.journal``, ``twinlog.copier``]
<- ``broker`` (partitions, coordinator, the embedded ``Broker``). Nothing is
imported here: import from the floor you need.
"""
