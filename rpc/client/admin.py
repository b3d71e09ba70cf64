"""``Admin``: topics, transactions, producers and consumer groups.

    with Admin("127.0.0.1:7070") as admin:
        admin.create_topic("orders", partitions=4)
        for txn in admin.list_transactions():
            print(txn.transaction_id, txn.state.value)
        admin.reset_group_offsets("billing", "orders", ResetTo.earliest(), dry_run=True)

Reads and idempotent calls are retried on retriable errors; creating and deleting a
topic are not (a retry after a lost answer would report TopicExistsError or an unknown
topic); deleting a group is, and a retry that finds the group gone after a lost answer
counts as done. Every call waits at most ``default_api_timeout_ms`` in all, then raises
RequestTimedOutError.

Thread rule: any thread.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, cast

from twinlog.engine.base.cluster_metadata import ClusterMetadata
from twinlog.engine.base.errors import (
    GroupIdNotFoundError,
    InvalidConfigError,
    NonEmptyGroupError,
    TwinlogError,
    UnknownTopicOrPartitionError,
)
from twinlog.engine.base.types import (
    REPLICATION_FACTOR_SETTING,
    ProducerDescription,
    TopicDescription,
    TopicPartition,
    TransactionDescription,
)
from twinlog.engine.broker.leader_elections import ElectionResult
from twinlog.engine.broker.reassignments import MoveResult, PartitionMove, Reassignment
from twinlog.engine.broker.rebalance_plan import PlacedPartition, RebalancePlan, plan_rebalance
from twinlog.engine.groups.group_calls import GroupDescription, GroupListing
from twinlog.rpc.client.call_deadline import NO_ANSWER_ERRORS, deadline_at
from twinlog.rpc.client.connection import ConnectionOptions, Target, connect
from twinlog.rpc.client.group_offsets import (
    OffsetReset,
    PartitionLag,
    ResetTo,
    committed_or_none,
    lag_rows,
    partitions_without_commit,
    reset_offset,
)
from twinlog.rpc.client.kafka_config import accepts_kafka_names
from twinlog.rpc.client.retry import RetryPolicy, call_with_retry
from twinlog.rpc.client.timeouts import DEFAULT_API_TIMEOUT_MS, require_positive_ms
from twinlog.rpc.policy.acl_bindings import (
    AclEntry,
    AclFilter,
    describe_grant,
    resource_of_word,
)
from twinlog.rpc.policy.acl_store import AclStore, acl_store_of
from twinlog.rpc.policy.scram import ITERATIONS_DEFAULT, ScramCredential, salted_password
from twinlog.rpc.policy.scram_store import scram_store_of

ELECT_TIMEOUT_MS = 30_000  # how long elect_preferred_leaders waits for the controller
REASSIGN_TIMEOUT_MS = 30_000  # how long reassign_partitions waits for the controller


class Admin:
    @accepts_kafka_names("Admin")  # and config=; docs/client-config.md
    def __init__(
        self,
        target: Target,
        *,
        default_api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS,
        retry: RetryPolicy | None = None,
        connection: ConnectionOptions | None = None,
        **connection_options: Any,
    ) -> None:
        options = connection or ConnectionOptions(**connection_options)
        self.default_api_timeout_ms = require_positive_ms(
            "default_api_timeout_ms", default_api_timeout_ms
        )
        self._broker, self._owns_broker = connect(target, options)
        # Without a policy of its own, a call retries for as long as its deadline allows,
        # and then says it timed out (RequestTimedOutError), as default_api_timeout_ms promises.
        self.retry = retry or RetryPolicy(timeout_ms=self.default_api_timeout_ms)

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_broker:
            self._broker.close()
            self._owns_broker = False

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        replication_factor: int | None = None,
    ) -> TopicDescription:
        """Create ``name`` with ``partitions``; ``replication_factor`` as Kafka's
        ``NewTopic`` takes it (the same as the ``replication.factor`` setting; None: the
        cluster's default)."""
        with self._deadline():
            return self._broker.create_topic(
                name, partitions, _with_replication_factor(name, config, replication_factor)
            )

    def create_partitions(self, name: str, partitions: int) -> TopicDescription:
        """Grow ``name`` to ``partitions`` partitions in all (Kafka's ``create_partitions``
        with ``NewPartitions(total_count)``); a topic never shrinks. Records with a key may
        go to another partition from now on: the default partitioner hashes the key over
        the partition count. Needs ALTER on the topic."""
        with self._deadline():
            return self._broker.create_partitions(name, partitions)

    def alter_topic_config(
        self,
        name: str,
        set_values: Mapping[str, str] | None = None,
        deleted: Iterable[str] = (),
    ) -> TopicDescription:
        """Set ``set_values`` and put ``deleted`` back to the broker's defaults on a topic
        (Kafka's ``incremental_alter_configs`` of a TOPIC resource): checked whole first,
        then taken by every replica without a restart. Needs ALTER on the topic."""
        with self._deadline():
            return self._broker.alter_topic_config(name, dict(set_values or {}), list(deleted))

    def delete_topic(self, name: str) -> None:
        with self._deadline():
            self._broker.delete_topic(name)

    def _deadline(self) -> AbstractContextManager[None]:
        """The deadline of a call made once (not retried), or of a call of several requests
        (the group tools), each retried within what is left of it: ``call_with_retry``
        honours an enclosing deadline."""
        return self._deadline_of(self.default_api_timeout_ms)

    @staticmethod
    def _deadline_of(timeout_ms: int) -> AbstractContextManager[None]:
        return deadline_at(time.monotonic() + timeout_ms / 1000)

    def elect_preferred_leaders(
        self,
        partitions: Iterable[tuple[str, int]] | None = None,
        timeout_ms: int = ELECT_TIMEOUT_MS,
    ) -> list[ElectionResult]:
        """Lead ``partitions`` ((topic, partition) pairs; None: every partition) by their
        preferred leaders, each its first replica, where that replica is in sync (Kafka's
        ``AdminClient.elect_leaders(ElectionType.PREFERRED, ...)``). One result per
        partition; a partition that cannot move says why in its result, not by raising.
        Needs ALTER on the topics. Waits at most ``timeout_ms`` for the controller."""
        named = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        with self._deadline_of(timeout_ms + self.default_api_timeout_ms):
            return self._broker.elect_preferred_leaders(named, timeout_ms)

    def reassign_partitions(
        self,
        moves: Mapping[tuple[str, int], Iterable[int] | None],
        throttle_bytes_per_s: int = 0,
        timeout_ms: int = REASSIGN_TIMEOUT_MS,
    ) -> list[MoveResult]:
        """Move each partition ((topic, partition) -> its target replicas, the first the
        preferred leader; None cancels its running move) while it is written and read
        (Kafka's ``AdminClient.alter_partition_reassignments``). New replicas copy at most
        ``throttle_bytes_per_s`` (0: no limit). One result per move: a move the cluster
        refused carries its error (InvalidReplicaAssignmentError, ...) instead of raising.
        Returns once the controller took the moves (at most ``timeout_ms``); follow the
        copy with ``partition_reassignments``. Needs ALTER on the topics."""
        asked = []
        for (topic, partition), replicas in moves.items():
            target = () if replicas is None else tuple(replicas)
            if replicas is not None and not target:
                raise InvalidConfigError(
                    f"{topic}-{partition}: no target replicas given; pass None to cancel its "
                    "reassignment"
                )
            asked.append(PartitionMove(topic, partition, target))
        with self._deadline_of(timeout_ms + self.default_api_timeout_ms):
            return self._broker.reassign_partitions(asked, throttle_bytes_per_s, timeout_ms)

    def partition_reassignments(self) -> list[Reassignment]:
        """The reassignments that run, by topic and partition, with how far behind each
        new replica is (Kafka's ``AdminClient.list_partition_reassignments``)."""
        return call_with_retry(
            self.retry,
            self._broker.partition_reassignments,
            "partition_reassignments()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def plan_rebalance(self, leaving: Iterable[int] = ()) -> RebalancePlan:
        """A plan that spreads every partition's replicas and preferred leaders evenly over
        the registered brokers but ``leaving`` (``rebalance_plan``'s rules): nothing moves
        until ``execute_plan``. InvalidReplicaAssignmentError when a partition would keep
        fewer replicas than its topic's ``min.insync.replicas``."""
        metadata = self._cluster_metadata()
        running = self.partition_reassignments()
        if running:
            names = ", ".join(f"{r.topic}-{r.partition}" for r in running[:5])
            raise InvalidConfigError(
                f"{len(running)} reassignment(s) run ({names}): a plan made now would be made "
                "from replicas that are moving. Wait for them (twinlog partitions "
                "reassignments) or cancel them first"
            )
        placed = []
        for topic in metadata.topics:
            settings = {name: value for name, value, _given in self.topic_settings(topic.name)}
            min_insync_replicas = int(settings.get("min.insync.replicas", "1"))
            for item in topic.partitions:
                placed.append(
                    PlacedPartition(topic.name, item.partition, item.replicas, min_insync_replicas)
                )
        brokers = [broker.broker_id for broker in metadata.brokers]
        return plan_rebalance(placed, brokers, frozenset(leaving))

    def execute_plan(self, plan: RebalancePlan, throttle_bytes_per_s: int = 0) -> list[MoveResult]:
        """Start every move of ``plan`` (``reassign_partitions``); one result per move."""
        if not plan.moves:
            return []
        return self.reassign_partitions(
            {(move.topic, move.partition): move.target for move in plan.moves},
            throttle_bytes_per_s,
        )

    def shutdown_broker(self, broker_id: int) -> None:
        """Stop broker ``broker_id`` as SIGTERM does (a controlled shutdown, then a clean
        exit): the end of a decommission. Needs ALTER on ``broker:ID``."""
        shutdown = getattr(self._broker, "shutdown_broker", None)
        if shutdown is None:
            raise InvalidConfigError(
                "an embedded broker is stopped by the process that runs it, not over the wire"
            )
        with self._deadline_of(self.default_api_timeout_ms):
            shutdown(broker_id)

    def set_scram_credential(
        self, user: str, mechanism: str, password: str, iterations: int = ITERATIONS_DEFAULT
    ) -> None:
        """Let ``user`` log in to the Kafka listener with SASL ``mechanism`` (SCRAM-SHA-256
        or SCRAM-SHA-512) and ``password``. The salt and SaltedPassword are computed here:
        the password never leaves this process. Needs ALTER on the cluster (``cluster:*``)."""
        credential = ScramCredential.from_password(mechanism, password, iterations)
        salted = salted_password(mechanism, password, credential.salt, iterations)
        with self._deadline_of(self.default_api_timeout_ms):
            remote = getattr(self._broker, "set_scram_credential", None)
            if remote is None:
                self._embedded_scram_store().set(user, credential)
            else:
                remote(user, mechanism, iterations, credential.salt, salted)

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        """Remove ``user``'s credential for ``mechanism``; InvalidConfigError if it has none."""
        with self._deadline_of(self.default_api_timeout_ms):
            remote = getattr(self._broker, "delete_scram_credential", None)
            if remote is not None:
                remote(user, mechanism)
            elif not self._embedded_scram_store().delete(user, mechanism):
                raise InvalidConfigError(f"user {user!r} has no {mechanism} credential")

    def scram_users(self) -> dict[str, list[tuple[str, int]]]:
        """Every SCRAM user's (mechanism, iterations): nothing secret."""
        with self._deadline_of(self.default_api_timeout_ms):
            remote = getattr(self._broker, "scram_users", None)
            if remote is None:
                return self._embedded_scram_store().mechanisms()
            users: dict[str, list[tuple[str, int]]] = remote()
            return users

    def list_acls(
        self, principal: str | None = None, resource_type: str | None = None
    ) -> list[AclEntry]:
        """The grants in force, each with its source (``acl-file`` or ``store``), of
        ``principal`` and of ``resource_type`` (topic, group, transactional-id, cluster,
        broker) when given. Needs DESCRIBE on the cluster (``cluster:*``). An embedded
        broker lists its store only (it has no ACL file)."""
        with self._deadline_of(self.default_api_timeout_ms):
            remote = getattr(self._broker, "list_acls", None)
            if remote is not None:
                return cast(list[AclEntry], remote(principal, resource_type))
            resource = None if resource_type is None else resource_of_word(resource_type)
            return [
                AclEntry.of_grant(grant)
                for grant in self._embedded_acl_store().grants()
                if AclFilter(principal=principal, resource=resource).matches(grant)
            ]

    def create_acls(self, entries: Iterable[AclEntry]) -> list[AclEntry]:
        """Grant these (Kafka's ``create_acls``): kept by the server's store, durable, on
        a cluster every broker's. Each is checked first; none is stored if one is refused
        (InvalidConfigError saying why). Answers those not stored already. Needs ALTER on
        the cluster (``cluster:*``)."""
        wanted = list(entries)
        with self._deadline_of(self.default_api_timeout_ms):
            remote = getattr(self._broker, "create_acls", None)
            if remote is not None:
                return cast(list[AclEntry], remote(wanted))
            grants = [entry.to_grant() for entry in wanted]
            return [AclEntry.of_grant(g) for g in self._embedded_acl_store().add(grants)]

    def delete_acls(self, entries: Iterable[AclEntry]) -> list[AclEntry]:
        """Remove these stored grants, each named exactly as listed; InvalidConfigError for
        one that is not stored (the ACL file's are removed by editing the file). Needs
        ALTER on the cluster."""
        wanted = list(entries)
        with self._deadline_of(self.default_api_timeout_ms):
            remote = getattr(self._broker, "delete_acls", None)
            if remote is not None:
                return cast(list[AclEntry], remote(wanted))
            grants = [entry.to_grant() for entry in wanted]
            removed = self._embedded_acl_store().remove(grants)
            missing = [grant for grant in grants if grant not in removed]
            if missing:
                raise InvalidConfigError(f"no stored grant '{describe_grant(missing[0])}'")
            return [AclEntry.of_grant(grant) for grant in removed]

    def _embedded_acl_store(self) -> AclStore:
        store = acl_store_of(self._broker)
        if store is None:
            raise InvalidConfigError(
                "this broker keeps no ACL store (it has no data directory); connect to a "
                "server (--server HOST:PORT, or a cluster's bootstrap list)"
            )
        return store

    def _embedded_scram_store(self) -> Any:
        store = scram_store_of(self._broker)
        if store is None:
            raise InvalidConfigError(
                "SCRAM credentials are set through one server: connect to one (--server "
                "HOST:PORT), not to a cluster's bootstrap list (on a cluster, any broker "
                "keeps them for all, in ZooKeeper)"
            )
        return store

    def _cluster_metadata(self) -> ClusterMetadata:
        """The cluster's metadata; InvalidConfigError for a single node or an embedded
        broker (one broker: nothing to spread)."""
        read = getattr(self._broker, "cluster_metadata", None)
        metadata = None if read is None else read()
        if metadata is None or metadata.standalone:
            raise InvalidConfigError(
                "this is a single node (one broker): its partitions cannot move. Run a cluster "
                "(docs/cluster.md) to spread them over brokers"
            )
        return cast(ClusterMetadata, metadata)

    def list_topics(self) -> list[str]:
        return call_with_retry(
            self.retry,
            self._broker.list_topics,
            "list_topics()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def describe_topic(self, name: str) -> TopicDescription:
        """Per partition: log start/end offsets and journal entries of undecided transactions."""
        return call_with_retry(
            self.retry,
            lambda: self._broker.describe_topic(name),
            "describe_topic()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def topic_settings(self, name: str) -> list[tuple[str, str, bool]]:
        """Every setting in effect on ``name``, under Kafka's names: (name, value, set on
        the topic; False: the broker's default), as ``kafka-configs.sh --describe --all``."""
        return call_with_retry(
            self.retry,
            lambda: self._broker.topic_settings(name),
            "topic_settings()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def list_transactions(self) -> list[TransactionDescription]:
        return call_with_retry(
            self.retry,
            self._broker.list_transactions,
            "list_transactions()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def abort_transaction(self, transaction_id: int) -> None:
        """Abort a hanging transaction, whatever its producer (the producer is not fenced)."""
        call_with_retry(
            self.retry,
            lambda: self._broker.admin_abort_transaction(transaction_id),
            "abort_transaction()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def describe_producers(self, topic: str, partition: int = 0) -> list[ProducerDescription]:
        return call_with_retry(
            self.retry,
            lambda: self._broker.describe_producers(topic, partition),
            "describe_producers()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def delete_records(self, offsets: Mapping[tuple[str, int], int]) -> dict[TopicPartition, int]:
        """Delete each partition's records below its offset ((topic, partition) -> offset;
        -1: every committed record, up to the high watermark), as Kafka's
        ``AdminClient.delete_records``: the partition's log starts there from now on, on
        every replica. Returns each partition's log start now (Kafka's low watermark): below
        the offset asked only while a transaction's copy starting there is not yet recorded
        as applied (ask again shortly). Needs DELETE on the topics.

        Every partition is tried (each at its leader, retried while it moves: the same
        offset again changes nothing); then the first refusal is raised, naming in a note
        the partitions done: OffsetOutOfRangeError above the high watermark,
        UnknownTopicOrPartitionError, AuthorizationError without DELETE."""
        done: dict[TopicPartition, int] = {}
        failed: list[tuple[TopicPartition, TwinlogError]] = []
        with self._deadline():
            for (topic, partition), before_offset in offsets.items():
                key = TopicPartition(topic, partition)
                try:
                    done[key] = call_with_retry(
                        self.retry,
                        partial(self._broker.delete_records, topic, partition, before_offset),
                        f"delete_records({topic}-{partition})",
                    )
                except TwinlogError as error:
                    failed.append((key, error))
        if failed:
            refused_key, refusal = failed[0]
            others = ", ".join(f"{t}-{p}" for (t, p), _ in failed[1:]) or "none"
            deleted = ", ".join(f"{t}-{p} from {start}" for (t, p), start in done.items())
            refusal.add_note(
                f"delete_records: {refused_key.topic}-{refused_key.partition} refused; also "
                f"refused: {others}; deleted (log start now): {deleted or 'none'}"
            )
            raise refusal
        return done

    # --- consumer groups (kafka-consumer-groups.sh) -------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every group with members or committed offsets (on a cluster: from every broker)."""
        return call_with_retry(
            self.retry,
            self._broker.list_groups,
            "list_groups()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def describe_group(self, group_id: str) -> GroupDescription:
        """State, epoch, members and committed offsets; GroupIdNotFoundError if unknown."""
        return call_with_retry(
            self.retry,
            lambda: self._broker.describe_group(group_id),
            "describe_group()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group and its committed offsets.

        NonEmptyGroupError while it has members; GroupIdNotFoundError if unknown. Retried
        while a transaction holds its offsets (PendingTransactionError) and while the
        server does not answer.
        """
        unanswered = False  # an attempt whose answer was lost may have deleted the group

        def attempt() -> None:
            nonlocal unanswered
            try:
                self._broker.delete_group(group_id)
            except NO_ANSWER_ERRORS:
                unanswered = True
                raise
            except GroupIdNotFoundError:
                if not unanswered:
                    raise

        call_with_retry(
            self.retry, attempt, "delete_group()", timeout_ms=self.default_api_timeout_ms
        )

    def delete_group_offsets(
        self, group_id: str, partitions: str | Iterable[tuple[str, int]]
    ) -> dict[TopicPartition, TwinlogError | None]:
        """Delete the group's committed offsets of ``partitions`` (``--delete-offsets``,
        Kafka's OffsetDelete): a topic name (all its partitions) or (topic, partition)
        pairs. Each partition's refusal, or None where its offset is deleted (or it had
        none).

        Needs DELETE on the group (else AuthorizationError) and READ on each topic (else
        AuthorizationError for its partitions). GroupIdNotFoundError for an unknown group.
        A partition of a topic a member of the group reads is refused with
        GroupSubscribedToTopicError (stop those consumers first), one a transaction holds
        with PendingTransactionError (ask again once it ends); the others are deleted.

        Example::

            answers = admin.delete_group_offsets("billing", "orders")
            kept = [partition for partition, error in answers.items() if error is not None]
        """
        with self._deadline():
            chosen = self._resolve_partitions(partitions)
            return call_with_retry(
                self.retry,
                lambda: self._broker.delete_offsets(group_id, chosen),
                "delete_group_offsets()",
                timeout_ms=self.default_api_timeout_ms,
            )

    def group_offsets(self, group_id: str) -> list[PartitionLag]:
        """Per partition the group has committed for or a member owns: the committed
        offset, the log end offset, the lag and the owning member (``--describe``).
        GroupIdNotFoundError if the group is unknown."""
        with self._deadline():
            description = self.describe_group(group_id)
            return lag_rows(description, self._log_end_offset)

    def reset_group_offsets(
        self,
        group_id: str,
        partitions: str | Iterable[tuple[str, int]],
        to: ResetTo,
        dry_run: bool = False,
    ) -> list[OffsetReset]:
        """Move the group's committed offsets (``--reset-offsets``); one row per partition.

        ``partitions``: a topic name (all its partitions) or (topic, partition) pairs.
        ``to``: ``ResetTo.earliest()``, ``.latest()``, ``.offset(n)``, ``.timestamp(when)``
        or ``.shift_by(n)``; each target is clamped into the partition's [earliest, latest].
        A shift needs a committed offset to shift from: a partition without one is refused
        with InvalidConfigError naming it (as Kafka's tool does), and nothing is committed.

        ``dry_run``: compute the rows and commit nothing. Otherwise all new offsets are
        committed in one commit from outside the group, which the group's coordinator
        refuses with NonEmptyGroupError while the group has members: stop its consumers
        first. A group that does not exist yet is created with these offsets.
        """
        with self._deadline():
            chosen = self._resolve_partitions(partitions)
            committed = call_with_retry(
                self.retry,
                lambda: self._broker.fetch_offsets(group_id, chosen),
                "fetch_offsets()",
                timeout_ms=self.default_api_timeout_ms,
            )
            if to.kind == "shift":
                missing = partitions_without_commit(chosen, committed)
                if missing:
                    raise InvalidConfigError(
                        f"cannot shift the offsets of group {group_id!r}: no committed offset "
                        f"to shift from for {', '.join(str(p) for p in missing)}; reset those "
                        "with another target first"
                    )
            rows = []
            for partition in chosen:
                previous = committed_or_none(committed.get(partition))
                new_offset = reset_offset(to, previous, partial(self._list_offset, partition))
                rows.append(OffsetReset(partition.topic, partition.partition, previous, new_offset))
            if not dry_run:
                self._commit_from_outside(
                    group_id, {TopicPartition(r.topic, r.partition): r.new_offset for r in rows}
                )
            return rows

    def _resolve_partitions(
        self, partitions: str | Iterable[tuple[str, int]]
    ) -> list[TopicPartition]:
        if isinstance(partitions, str):
            description = self.describe_topic(partitions)
            chosen = [TopicPartition(partitions, p.partition) for p in description.partitions]
        else:
            chosen = list(dict.fromkeys(TopicPartition(*p) for p in partitions))
        if not chosen:
            raise InvalidConfigError("no partitions given: name a topic or some partitions")
        return chosen

    def _list_offset(self, partition: TopicPartition, spec: str | int) -> int:
        return call_with_retry(
            self.retry,
            lambda: self._broker.list_offset(partition.topic, partition.partition, spec),
            "list_offset()",
            timeout_ms=self.default_api_timeout_ms,
        )

    def _log_end_offset(self, partition: TopicPartition) -> int | None:
        """None for a partition that is gone: a group keeps the offsets of a deleted topic."""
        try:
            return self._list_offset(partition, "latest")
        except UnknownTopicOrPartitionError:
            return None

    def _commit_from_outside(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        # The same offsets committed twice are the same state: safe to retry.
        try:
            call_with_retry(
                self.retry,
                lambda: self._broker.commit_offsets(group_id, offsets),
                "commit_offsets()",
                timeout_ms=self.default_api_timeout_ms,
            )
        except NonEmptyGroupError as error:
            raise NonEmptyGroupError(
                f"offsets of group {group_id!r} not reset, nothing committed: {error}"
            ) from error


def _with_replication_factor(
    topic: str, config: Mapping[str, str] | None, replication_factor: int | None
) -> Mapping[str, str] | None:
    """``config`` with ``replication_factor`` as its ``replication.factor`` setting."""
    if replication_factor is None:
        return config
    if isinstance(replication_factor, bool) or not isinstance(replication_factor, int):
        raise InvalidConfigError(
            f"topic {topic!r}: replication_factor must be an integer, not {replication_factor!r}"
        )
    given = dict(config or {})
    already = given.get(REPLICATION_FACTOR_SETTING)
    if already is not None and str(already).strip() != str(replication_factor):
        raise InvalidConfigError(
            f"topic {topic!r}: replication_factor={replication_factor} and the "
            f"{REPLICATION_FACTOR_SETTING} setting {already!r} disagree; give one of them"
        )
    given[REPLICATION_FACTOR_SETTING] = str(replication_factor)
    return given
