"""Consumer group membership: the floor between the broker and the records it keeps.

A group's coordinator (``group_membership``) takes heartbeats from members, keeps each
group's epoch and target assignment (``consumer_group``, ``assignor``), moves members to
their targets without two ever owning a partition (``member_assignment``: KIP-848's
incremental reconciliation), and fences commits by generation (KIP-447). The calls and
answers are plain values (``group_calls``). Nothing here touches disk or the network:
the broker gives it the topics and a way to make each change of a group (its epoch, its
members: ``durable_member``) durable, and hands it back the members of the groups it
loads.

It stands on ``engine.base`` only. ``engine.broker`` runs it (and keeps the offsets in
``__consumer_offsets``); its values travel in ``rpc.wire``, ``rpc.client`` and
``rpc.kafka``.
"""
