"""A subscribed consumer's side of its group's rebalances: ``Rebalancer`` applies, on the
consumer's thread inside ``poll``, what the group's coordinator changed (KIP-848; the
heartbeat thread of ``consumer_membership`` learns of it), and gives the subscription up.

An assignment change runs in this order: partitions lost are dropped (on-lost; nothing is
committed: another member may own them now), partitions revoked are committed (with
auto-commit) and then dropped (on-revoked), partitions given are taken (on-assigned); then
the membership hears what the consumer owns. The listener's methods
(``rebalance_listener``) run here, on the consumer's thread, and may call the consumer.

``consumer.Consumer`` calls it: ``join`` from ``subscribe`` (it makes the membership), ``await_assignment`` from
``poll``, ``leave`` from ``unsubscribe`` and ``close``. It changes ``SubscriptionState``
(the membership, the listener, who commits) and the assignment, through ``reassign``
(the consumer's, which also drops what the fetcher holds of a partition that leaves).

Thread rule: every method runs on the consumer's thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.client.consumer_commits import OffsetCommitter
from twinlog.rpc.client.consumer_membership import ConsumerMembership, Subscription
from twinlog.rpc.client.consumer_settings import ConsumerSettings
from twinlog.rpc.client.consumer_subscription import SubscriptionState
from twinlog.rpc.client.rebalance_listener import ConsumerRebalanceListener
from twinlog.rpc.wire.broker_api import BrokerApi

log = logging.getLogger("twinlog.client")


class Rebalancer:
    def __init__(
        self,
        broker: BrokerApi,
        subscriptions: SubscriptionState,
        commits: OffsetCommitter,
        reassign: Callable[[list[TopicPartition]], None],
        settings: ConsumerSettings,
        *,
        request_timeout_ms: int,
    ) -> None:
        self._broker = broker
        self._request_timeout_ms = request_timeout_ms
        self._subscriptions = subscriptions
        self._commits = commits
        self._reassign = reassign
        self._settings = settings

    def join(
        self,
        group_id: str,
        subscription: Subscription,
        listener: ConsumerRebalanceListener,
        client_id: str,
    ) -> None:
        """Consumer's thread, in subscribe: ``leave`` a subscription there is; a membership
        of ``subscription`` and ``listener`` become the subscription's, and its heartbeat
        thread starts joining the group."""
        if self._subscriptions.membership is not None:
            self.leave(autocommit=True, timeout_ms=None)
        settings = self._settings
        membership = ConsumerMembership(
            self._broker.group_heartbeat,
            self._broker.list_topics,
            group_id,
            subscription,
            instance_id=settings.group_instance_id,
            client_id=client_id,
            session_timeout_ms=settings.session_timeout_ms,
            max_poll_interval_ms=settings.max_poll_interval_ms,
            metadata_max_age_ms=settings.metadata_max_age_ms,
            request_timeout_ms=self._request_timeout_ms,
            retry=settings.retry,
        )
        self._subscriptions.listener = listener
        self._subscriptions.membership = membership
        membership.start()

    def leave(self, autocommit: bool, timeout_ms: int | None) -> None:
        """Consumer's thread: commit what is owned (with auto-commit and ``autocommit``,
        within ``timeout_ms``), on-revoked, leave the group, and drop the assignment."""
        subscriptions = self._subscriptions
        membership = subscriptions.membership
        if membership is None:
            return
        owned = [tp for tp in subscriptions.assigned if tp in membership.owned()]
        if owned:
            if self._settings.enable_auto_commit and autocommit:
                self._commits.commit_quietly(owned, "before leaving the group", timeout_ms)
            subscriptions.listener.on_partitions_revoked(owned)
        membership.leave()
        subscriptions.membership = None
        self._reassign([])

    def await_assignment(self, membership: ConsumerMembership, deadline_s: float) -> bool:
        """Consumer's thread, in poll: apply the group's changes; wait (until
        ``deadline_s``) while nothing is assigned."""
        while True:
            self._reconcile()
            if self._subscriptions.assigned:
                return True
            remaining_s = deadline_s - time.monotonic()
            if remaining_s <= 0:
                return False
            membership.changed.wait(timeout=remaining_s)

    def _reconcile(self) -> None:
        """Apply what the group's coordinator changed (on this thread, inside poll)."""
        subscriptions = self._subscriptions
        membership = subscriptions.membership
        if membership is None:
            return
        changes = membership.pending_changes()
        subscriptions.member_at_poll = changes.member
        if not changes:
            return
        listener = subscriptions.listener
        if changes.lost:
            lost = [tp for tp in subscriptions.assigned if tp in changes.lost]
            self._reassign([tp for tp in subscriptions.assigned if tp not in changes.lost])
            if lost:
                log.warning(
                    "group %r: partitions lost (not committed: another member may own them "
                    "now): %s",
                    self._settings.group_id,
                    ", ".join(f"{tp.topic}-{tp.partition}" for tp in lost),
                )
                listener.on_partitions_lost(lost)
        if changes.revoked:
            revoked = sorted(changes.revoked)
            if self._settings.enable_auto_commit:
                self._commits.commit_quietly(revoked, "before revoking them")
            listener.on_partitions_revoked(revoked)
            self._reassign([tp for tp in subscriptions.assigned if tp not in changes.revoked])
        if changes.assigned:
            self._reassign([*subscriptions.assigned, *sorted(changes.assigned)])
            listener.on_partitions_assigned(sorted(changes.assigned))
        if not membership.acknowledge(changes) and changes.assigned:
            gone = set(changes.assigned)
            self._reassign([tp for tp in subscriptions.assigned if tp not in gone])
            listener.on_partitions_lost(sorted(gone))
