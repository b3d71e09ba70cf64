"""The network floors: the doors to a broker, and the command line.

The README's "Layout" table is the one list of the floors, highest first. ``rpc/`` holds
the network doors (the generated gRPC code, what both ends share, the inter-broker
services, the client and the server, the Kafka listener) and the command line
(``rpc/cli``, the top). The engine never imports these.
"""
