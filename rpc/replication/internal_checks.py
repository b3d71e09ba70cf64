"""Every internal call checked against what the cluster knows, not what the caller claims.

The inter-broker services (Replication, Coordination) act on a caller's word: a fetch
names the follower it speaks for, a coordinator call names its coordinator partition and
epoch. Before a call reaches the broker, ``InternalCallChecks`` holds those words against
ZooKeeper's partition states and broker registrations (``coordination_locator``), and
against the broker the caller's certificate proves (``broker_identity``; None on a cluster
without broker certificates, where only the epochs can be checked):

| call | the caller must be | refused with |
| --- | --- | --- |
| replica Fetch | the broker it names, registered with the broker epoch it carries | ClusterAuthorizationError; StaleBrokerEpochError |
| CountEntries, ApplyCommit, ApplyAbort | the leader of ``__txn_journal-N``, N owning the transaction, at most ZooKeeper's epoch of it | ClusterAuthorizationError (N does not own it); NotCoordinatorError (another broker leads N); TransactionCoordinatorFencedError (an epoch above ZooKeeper's) |
| RegisterPartition | the leader of the partition it registers | NotLeaderOrFollowerError |
| SettleOffsetsHolder | the leader of the group's ``__consumer_offsets`` partition | NotCoordinatorError |

Whether a fetch's broker is a replica of each partition is the partition's own check
(``ReplicaSet.record_fetch``). A caller that looks stale is looked up once more (the
locator's refresh: an answer read after the call began), so an honest broker that just
took a role is not refused on an old cache; ZooKeeper unreadable refuses retriably.

A coordinator epoch above the one ZooKeeper records is refused here, before the partition
would remember it as the highest seen (one forged call would fence the real coordinator
out until the next leader change).

Refusals are audited (``internal.refused``) by the services, with the caller's name.

Thread rule: any thread (the locator and the epoch cache are thread-safe).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from twinlog.engine.base.errors import (
    ClusterAuthorizationError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    StaleBrokerEpochError,
    TransactionCoordinatorFencedError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.replication.fetch_calls import ReplicaFetch
from twinlog.engine.transactions.partition_calls import (
    CallEpochs,
    RegisterPartition,
    SettleOffsetsHolder,
    coordinator_partition_of,
)

if TYPE_CHECKING:  # the locator reads ZooKeeper (kazoo): a single node never loads it
    from twinlog.rpc.replication.coordination_locator import LeaderLocator, Location

# A fetch with an unknown broker epoch reads the registrations again at most this often
# (a former incarnation fetching in a loop must not read ZooKeeper at every fetch).
EPOCH_REFRESH_INTERVAL_S = 1.0
# A known epoch is trusted this long after the read that found it: a broker whose session
# expired (and whose registration is gone) is refused within it.
EPOCH_MATCH_AGE_MAX_S = 10.0


class RegisteredEpochs:
    """Each live broker's registration epoch (its znode's czxid), read from ZooKeeper.

    ``read``: the live brokers' epochs now (``broker_registration.live_brokers``)."""

    def __init__(
        self,
        read: Callable[[], dict[int, int]],
        refresh_interval_s: float = EPOCH_REFRESH_INTERVAL_S,
        match_age_max_s: float = EPOCH_MATCH_AGE_MAX_S,
    ) -> None:
        self._read = read
        self.refresh_interval_s = refresh_interval_s
        self.match_age_max_s = match_age_max_s
        self._lock = threading.Lock()
        self._epochs: dict[int, int] = {}
        self._read_at = float("-inf")  # when the last read began (one per interval)
        self._stored_at = float("-inf")  # when the read held in _epochs began

    def epoch_of(self, broker_id: int, expected: int) -> int | None:
        """``broker_id``'s registered epoch; read again when it is not ``expected`` and the
        last read is older than the refresh interval."""
        with self._lock:
            found = self._epochs.get(broker_id)
            now = time.monotonic()
            if found == expected and now - self._stored_at < self.match_age_max_s:
                return found
            if now - self._read_at < self.refresh_interval_s:
                return found
            self._read_at = now  # one reader per interval; the others answer from memory
        try:  # not under the lock: a slow ZooKeeper must not stall every other fetch
            fresh = self._read()
        except Exception:  # ZooKeeper away: keep what was known
            return found
        with self._lock:
            if now > self._stored_at:  # a slower, older read never replaces a newer one
                self._epochs, self._stored_at = fresh, now
            return self._epochs.get(broker_id)


class InternalCallChecks:
    def __init__(
        self,
        locator: LeaderLocator,
        epochs: RegisteredEpochs,
        offsets_partition_of: Callable[[str], TopicPartition],
    ) -> None:
        self.locator = locator
        self.epochs = epochs
        self.offsets_partition_of = offsets_partition_of

    # --- Replication -----------------------------------------------------------------

    def check_fetch(self, caller: int | None, request: ReplicaFetch) -> None:
        if caller is not None and request.replica_id != caller:
            raise ClusterAuthorizationError(
                f"broker {caller} fetched in the name of broker {request.replica_id}: a "
                "broker fetches only as itself; nothing was acknowledged"
            )
        registered = self.epochs.epoch_of(request.replica_id, request.broker_epoch)
        if registered != request.broker_epoch:
            raise StaleBrokerEpochError(
                f"broker {request.replica_id} fetched with broker epoch "
                f"{request.broker_epoch}, ZooKeeper registers "
                f"{'no such broker' if registered is None else registered}: a former "
                "incarnation, or a broker not registered yet; nothing was acknowledged"
            )

    # --- Coordination: a coordinator's calls to a partition ------------------------

    def check_coordinator(
        self, caller: int | None, transaction_id: int, epochs: CallEpochs
    ) -> None:
        """The caller leads the coordinator partition that owns ``transaction_id``, at an
        epoch no higher than ZooKeeper records for it."""
        owner = coordinator_partition_of(transaction_id)
        if epochs.coordinator_partition != owner:
            raise ClusterAuthorizationError(
                f"a call for transaction {transaction_id} came as coordinator "
                f"{epochs.coordinator_partition}; coordinator {owner} owns it"
            )
        journal = TopicPartition(TXN_JOURNAL_TOPIC, owner)
        location = self.locator.partition_leader(journal)
        if not _speaks_for(location, caller, epochs.coordinator_epoch):
            location = self.locator.partition_leader(journal, refresh=True)
        if location is None or location.gone:
            raise NotCoordinatorError(
                f"the leader of {journal.topic}-{owner} could not be confirmed in ZooKeeper "
                "(no live leader, or ZooKeeper unreadable); retry shortly"
            )
        if caller is not None and location.broker_id != caller:
            # Retriable, as the deposed coordinator's own journal append would say: its
            # producer follows the coordinator to its new broker (a fatal answer would kill
            # a producer whose commit merely arrived during the move).
            raise NotCoordinatorError(
                f"broker {caller} called as coordinator {owner}, which broker "
                f"{location.broker_id} leads (epoch {location.leader_epoch}): find the "
                "coordinator again; nothing was changed"
            )
        if epochs.coordinator_epoch > location.leader_epoch:
            raise TransactionCoordinatorFencedError(
                f"coordinator epoch {epochs.coordinator_epoch} of {journal.topic}-{owner} is "
                f"above the {location.leader_epoch} ZooKeeper records: refused, and not "
                "remembered; nothing was changed"
            )

    # --- Coordination: a partition's and a group coordinator's calls ---------------

    def check_register(self, caller: int | None, request: RegisterPartition) -> None:
        if caller is None:
            return
        self._check_leads(caller, request.topic_partition, "registers a transaction on")

    def check_settle(self, caller: int | None, request: SettleOffsetsHolder) -> None:
        if caller is None:
            return
        offsets = self.offsets_partition_of(request.group_id)
        try:
            self._check_leads(caller, offsets, f"settles offsets of group {request.group_id!r} for")
        except NotLeaderOrFollowerError as error:
            raise NotCoordinatorError(str(error)) from None

    def _check_leads(self, caller: int, topic_partition: TopicPartition, doing: str) -> None:
        location = self.locator.partition_leader(topic_partition)
        if location is None or location.broker_id != caller:
            location = self.locator.partition_leader(topic_partition, refresh=True)
        if location is None or location.broker_id != caller:
            leader = "no live broker" if location is None or location.gone else location.broker_id
            raise NotLeaderOrFollowerError(
                f"broker {caller} {doing} {topic_partition.topic}-{topic_partition.partition}, "
                f"which {leader} leads in ZooKeeper; nothing was changed"
            )


def _speaks_for(location: Location | None, caller: int | None, epoch: int) -> bool:
    """Does the cached location already vouch for the caller at this epoch?"""
    if location is None or location.gone:
        return False
    return (caller is None or location.broker_id == caller) and epoch <= location.leader_epoch
