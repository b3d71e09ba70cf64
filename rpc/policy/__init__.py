"""The one front-door policy: who is calling and what they may do, for both front doors.

Owns: authentication results (bearer tokens and mutual-TLS certificates to a
``Principal``: ``auth``), the ACLs (``auth.Acl``, checked through ``auth.Guard``), who
may use a producer id (``producer_access``: Kafka's TransactionalId rule, and the owner of
an idempotent producer id), and the audit log of refusals and administrative changes
(``audit``, written as structured lines by ``structured_log``).

Serves both front doors: the gRPC server (``rpc.server``) and the Kafka listener
(``rpc.kafka``) ask the same guard the same questions, so a grant means the same on either
door. Below it: ``rpc.cluster``, ``rpc.wire`` and the engine (the internal-topic rule is
``engine.broker.internal_topics``'s, the producer ids' owners the broker's).
"""
