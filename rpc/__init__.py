"""The network floors: ``generated`` (protobuf) <- ``wire`` (shared by both ends) <-
``client`` and ``server`` <- ``cli`` (the top). The engine never imports these.
"""
