"""twinlog.v1.Administration on top of a broker.

With an ACL file, ListTransactions and DescribeProducers show only what the
principal may describe (``twinlog.rpc.policy.producer_access``): transaction and producer ids are
what a request needs to act on a transaction, so they are not shown to everyone;
the groups a listed transaction holds offsets of need DESCRIBE on each group.
``Metadata`` answers who leads what (``metadata_source``: ZooKeeper's view on a cluster
broker, the server itself on a single node); like ListTopics it needs an authenticated
principal and shows every topic; DescribeTopic with ``allow_auto_topic_creation`` (a
producer's first use) creates a missing topic as the broker's auto.create.topics.enable
says, with CREATE on it (``topic_auto_creation``). ``FindCoordinator`` names a key's
coordinator (``coordinator_source``); as Kafka's, it needs DESCRIBE on the transactional id or group
asked about (WRITE on a transactional id, READ on a group imply it), and only an
authenticated principal for a producer or transaction id (its coordinator partition is
its low bits: nothing to hide).
Thread rule: one instance serves every worker thread; it holds no mutable state.
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc

from twinlog.engine.base.errors import InvalidConfigError, TwinlogError
from twinlog.engine.base.types import TopicPartition
from twinlog.rpc.cluster.coordinator_source import (
    CoordinatorSource,
    journal_partitions_of,
)
from twinlog.rpc.cluster.metadata_source import MetadataSource
from twinlog.rpc.generated.twinlog.v1 import admin_pb2, admin_pb2_grpc, common_pb2
from twinlog.rpc.policy.acl_admin import (
    acl_in_force,
    create_acls,
    delete_stored_acls,
    list_acls,
)
from twinlog.rpc.policy.acl_bindings import AclEntry, AclFilter, resource_of_word
from twinlog.rpc.policy.acl_proto import entry_of_proto, entry_to_proto
from twinlog.rpc.policy.acl_view import LiveAcl
from twinlog.rpc.policy.alterable_partitions import alterable_partitions
from twinlog.rpc.policy.audit import audited
from twinlog.rpc.policy.auth import CLUSTER_NAME, Grant, Guard, Operation, Resource
from twinlog.rpc.policy.producer_access import TransactionalAccess
from twinlog.rpc.policy.scram import ScramCredential
from twinlog.rpc.policy.scram_store import ScramStore, scram_store_of
from twinlog.rpc.policy.topic_auto_creation import auto_creation
from twinlog.rpc.server.broker_shutdown import BrokerShutdown
from twinlog.rpc.server.call import principal_of, unary
from twinlog.rpc.wire.broker_api import BrokerApi, CoordinatorKeyType
from twinlog.rpc.wire.cluster_convert import (
    coordinator_to_proto,
    key_type_from_proto,
    metadata_to_proto,
)
from twinlog.rpc.wire.convert import (
    election_to_proto,
    producer_to_proto,
    topic_to_proto,
    transaction_to_proto,
)
from twinlog.rpc.wire.errors import describe
from twinlog.rpc.wire.group_convert import description_to_proto, listing_to_proto
from twinlog.rpc.wire.reassignment_convert import (
    move_result_to_proto,
    moves_from_proto,
    reassignment_to_proto,
)

ELECT_TIMEOUT_MS_DEFAULT = 30_000  # an ElectLeaders call that names no timeout
REASSIGN_TIMEOUT_MS_DEFAULT = 30_000  # a ReassignPartitions call that names no timeout


class AdministrationService(admin_pb2_grpc.AdministrationServicer):
    def __init__(
        self,
        broker: BrokerApi,
        guard: Guard,
        metadata_source: MetadataSource,
        coordinator_source: CoordinatorSource | None = None,
        shutdown: BrokerShutdown | None = None,
    ) -> None:
        """``coordinator_source`` None: one over ``metadata_source``, with the broker's
        journal partition count as ``twinlog.Broker`` holds it."""
        self.broker = broker
        self.shutdown = shutdown  # None: embedded, no remote stop
        self.guard = guard
        self.metadata_source = metadata_source
        self.coordinator_source = coordinator_source or CoordinatorSource(
            metadata_source,
            journal_partitions=lambda: journal_partitions_of(broker),
        )
        self.access = TransactionalAccess(guard, broker)

    @unary
    def CreateTopic(
        self, request: admin_pb2.CreateTopicRequest, context: grpc.ServicerContext
    ) -> admin_pb2.TopicDescription:
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.CREATE, (request.name,))
        # Unset means 1 (the API's default); an explicit 0 is refused by the broker, as
        # embedded, rather than quietly made 1.
        partitions = request.partitions if request.HasField("partitions") else 1
        with audited(
            "topic.create",
            principal=principal.name,
            peer=context.peer(),
            topic=request.name,
            partitions=partitions,
        ):
            description = self.broker.create_topic(
                request.name, partitions, dict(request.config) or None
            )
        return topic_to_proto(description)

    @unary
    def CreatePartitions(
        self, request: admin_pb2.CreatePartitionsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.TopicDescription:
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.ALTER, (request.name,))
        if request.validate_only:
            return topic_to_proto(
                self.broker.create_partitions(request.name, request.partitions, validate_only=True)
            )
        with audited(
            "topic.alter",
            principal=principal.name,
            peer=context.peer(),
            topic=request.name,
            partitions=request.partitions,
        ):
            description = self.broker.create_partitions(request.name, request.partitions)
        return topic_to_proto(description)

    @unary
    def AlterTopicConfig(
        self, request: admin_pb2.AlterTopicConfigRequest, context: grpc.ServicerContext
    ) -> admin_pb2.TopicDescription:
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.ALTER_CONFIGS, (request.name,))
        if request.validate_only:
            return topic_to_proto(
                self.broker.alter_topic_config(
                    request.name, dict(request.set), list(request.delete), validate_only=True
                )
            )
        with audited(
            "topic.config",
            principal=principal.name,
            peer=context.peer(),
            topic=request.name,
            set=",".join(f"{key}={value}" for key, value in sorted(request.set.items())),
            delete=",".join(request.delete),
        ):
            description = self.broker.alter_topic_config(
                request.name, dict(request.set), list(request.delete)
            )
        return topic_to_proto(description)

    @unary
    def DeleteTopic(
        self, request: admin_pb2.DeleteTopicRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DeleteTopicResponse:
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.DELETE, (request.name,))
        with audited(
            "topic.delete", principal=principal.name, peer=context.peer(), topic=request.name
        ):
            self.broker.delete_topic(request.name)
        return admin_pb2.DeleteTopicResponse()

    @unary
    def ElectLeaders(
        self, request: admin_pb2.ElectLeadersRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ElectLeadersResponse:
        principal = principal_of(self.guard, context)
        named = [TopicPartition(p.topic, p.partition) for p in request.partitions]
        if named:
            self.guard.require(principal, Operation.ALTER, sorted({p.topic for p in named}))
            asked: list[TopicPartition] | None = named
        else:
            asked = alterable_partitions(self.guard, principal, self.broker)
        timeout_ms = request.timeout_ms or ELECT_TIMEOUT_MS_DEFAULT
        with audited(
            "leaders.elect",
            principal=principal.name,
            peer=context.peer(),
            partitions=len(named) if named else "all",
        ):
            results = self.broker.elect_preferred_leaders(asked, timeout_ms)
        return admin_pb2.ElectLeadersResponse(results=[election_to_proto(r) for r in results])

    @unary
    def ReassignPartitions(
        self, request: admin_pb2.ReassignPartitionsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ReassignPartitionsResponse:
        principal = principal_of(self.guard, context)
        moves = moves_from_proto(request.moves)
        self.guard.require(principal, Operation.ALTER, sorted({m.topic for m in moves}))
        timeout_ms = request.timeout_ms or REASSIGN_TIMEOUT_MS_DEFAULT
        with audited(
            "partitions.reassign",
            principal=principal.name,
            peer=context.peer(),
            moves=";".join(
                f"{m.topic}-{m.partition}:{','.join(map(str, m.replicas)) or 'cancel'}"
                for m in moves
            ),
            throttle_bytes_per_s=request.throttle_bytes_per_s,
        ):
            results = self.broker.reassign_partitions(
                moves, request.throttle_bytes_per_s, timeout_ms
            )
        return admin_pb2.ReassignPartitionsResponse(
            results=[move_result_to_proto(r) for r in results]
        )

    @unary
    def ListPartitionReassignments(
        self,
        request: admin_pb2.ListPartitionReassignmentsRequest,
        context: grpc.ServicerContext,
    ) -> admin_pb2.ListPartitionReassignmentsResponse:
        principal_of(self.guard, context)  # as Metadata: who replicates what, to any principal
        return admin_pb2.ListPartitionReassignmentsResponse(
            reassignments=[reassignment_to_proto(r) for r in self.broker.partition_reassignments()]
        )

    @unary
    def ShutdownBroker(
        self, request: admin_pb2.ShutdownBrokerRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ShutdownBrokerResponse:
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.ALTER, [str(request.broker_id)], Resource.BROKER)
        with audited(
            "broker.shutdown",
            principal=principal.name,
            peer=context.peer(),
            broker_id=request.broker_id,
        ):
            if self.shutdown is None:
                raise InvalidConfigError(
                    "this server runs embedded (not twinlog serve): it cannot be stopped over "
                    "the wire; stop the process that runs it"
                )
            self.shutdown.request(request.broker_id, principal.name)
        return admin_pb2.ShutdownBrokerResponse()

    def _scram_store(self) -> ScramStore:
        store = scram_store_of(self.broker)
        if store is None:
            raise InvalidConfigError(
                "this server keeps no SCRAM credentials (its broker has no data directory)"
            )
        return store

    @unary
    def SetScramCredential(
        self, request: admin_pb2.SetScramCredentialRequest, context: grpc.ServicerContext
    ) -> admin_pb2.SetScramCredentialResponse:
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.ALTER, [CLUSTER_NAME], Resource.CLUSTER)
        if not request.user:
            raise InvalidConfigError("a SCRAM user needs a name; pass --user")
        try:
            credential = ScramCredential.from_salted_password(
                request.mechanism, request.salt, request.iterations, request.salted_password
            )
        except ValueError as error:
            raise InvalidConfigError(f"SCRAM credential of {request.user!r}: {error}") from None
        with audited(
            "scram.set",
            principal=principal.name,
            peer=context.peer(),
            user=request.user,
            mechanism=request.mechanism,
            iterations=request.iterations,
        ):
            self._scram_store().set(request.user, credential)
        return admin_pb2.SetScramCredentialResponse()

    @unary
    def DeleteScramCredential(
        self, request: admin_pb2.DeleteScramCredentialRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DeleteScramCredentialResponse:
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.ALTER, [CLUSTER_NAME], Resource.CLUSTER)
        with audited(
            "scram.delete",
            principal=principal.name,
            peer=context.peer(),
            user=request.user,
            mechanism=request.mechanism,
        ):
            if not self._scram_store().delete(request.user, request.mechanism):
                raise InvalidConfigError(
                    f"user {request.user!r} has no {request.mechanism} credential; "
                    "'twinlog users list' shows the users and their mechanisms"
                )
        return admin_pb2.DeleteScramCredentialResponse()

    @unary
    def ListScramUsers(
        self, request: admin_pb2.ListScramUsersRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ListScramUsersResponse:
        principal = principal_of(self.guard, context)
        if not self.guard.may_describe(principal, CLUSTER_NAME, Resource.CLUSTER):
            self.guard.require(principal, Operation.DESCRIBE, [CLUSTER_NAME], Resource.CLUSTER)
        users = [
            admin_pb2.ScramUser(
                user=user,
                mechanisms=[mechanism for mechanism, _ in held],
                iterations=[iterations for _, iterations in held],
            )
            for user, held in self._scram_store().mechanisms().items()
        ]
        return admin_pb2.ListScramUsersResponse(users=users)

    def _may_administer_acls(self, context: grpc.ServicerContext, operation: Operation) -> str:
        """The caller's name, once it may ``operation`` the cluster's ACLs (DESCRIBE: ALTER
        implies it); AuthorizationError (audited) otherwise."""
        principal = principal_of(self.guard, context)
        if operation is not Operation.DESCRIBE or not self.guard.may_describe(
            principal, CLUSTER_NAME, Resource.CLUSTER
        ):
            self.guard.require(principal, operation, [CLUSTER_NAME], Resource.CLUSTER)
        return principal.name

    @unary
    def ListAcls(
        self, request: admin_pb2.ListAclsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ListAclsResponse:
        self._may_administer_acls(context, Operation.DESCRIBE)
        acl = acl_in_force(self.guard)
        resource = None
        if request.HasField("resource_type"):
            resource = resource_of_word(request.resource_type)
        principal = request.principal if request.HasField("principal") else None
        listed = list_acls(acl, AclFilter(principal=principal, resource=resource))
        return admin_pb2.ListAclsResponse(
            grants=[entry_to_proto(AclEntry.of_grant(i.grant, i.source)) for i in listed]
        )

    @unary
    def CreateAcls(
        self, request: admin_pb2.CreateAclsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.CreateAclsResponse:
        principal, acl, grants = self._acl_change(context, request.grants)
        created = create_acls(acl, grants, principal, context.peer())
        return admin_pb2.CreateAclsResponse(
            created=[entry_to_proto(AclEntry.of_grant(grant)) for grant in created]
        )

    @unary
    def DeleteAcls(
        self, request: admin_pb2.DeleteAclsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DeleteAclsResponse:
        principal, acl, grants = self._acl_change(context, request.grants)
        deleted = delete_stored_acls(acl, grants, principal, context.peer())
        return admin_pb2.DeleteAclsResponse(
            deleted=[entry_to_proto(AclEntry.of_grant(grant)) for grant in deleted]
        )

    def _acl_change(
        self, context: grpc.ServicerContext, grants: Iterable[admin_pb2.AclGrant]
    ) -> tuple[str, LiveAcl, list[Grant]]:
        """(the caller, the grants in force, the grants named), once the caller may
        change the ACLs."""
        principal = self._may_administer_acls(context, Operation.ALTER)
        acl = acl_in_force(self.guard)
        return principal, acl, [entry_of_proto(grant).to_grant() for grant in grants]

    @unary
    def ListTopics(
        self, request: admin_pb2.ListTopicsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ListTopicsResponse:
        principal_of(self.guard, context)
        return admin_pb2.ListTopicsResponse(names=self.broker.list_topics())

    @unary
    def DescribeTopic(
        self, request: admin_pb2.DescribeTopicRequest, context: grpc.ServicerContext
    ) -> admin_pb2.TopicDescription:
        principal = principal_of(self.guard, context)
        if not request.allow_auto_topic_creation:
            return topic_to_proto(self.broker.describe_topic(request.name))
        # A producer's first use: created when missing, if the broker's setting and the
        # caller's CREATE allow (topic_auto_creation); described either way.
        creating = auto_creation(self.guard, principal, request.name, peer=context.peer())
        return topic_to_proto(self.broker.auto_create_topic(request.name, creating))

    @unary
    def DescribeTopicSettings(
        self, request: admin_pb2.DescribeTopicRequest, context: grpc.ServicerContext
    ) -> admin_pb2.TopicSettings:
        principal_of(self.guard, context)
        return admin_pb2.TopicSettings(
            settings=[
                admin_pb2.TopicSetting(name=name, value=value, set_on_topic=given)
                for name, value, given in self.broker.topic_settings(request.name)
            ]
        )

    @unary
    def ListTransactions(
        self, request: admin_pb2.ListTransactionsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ListTransactionsResponse:
        principal = principal_of(self.guard, context)
        transactions = self.access.visible(principal, self.broker.list_transactions())
        return admin_pb2.ListTransactionsResponse(
            transactions=[
                transaction_to_proto(self.access.groups_shown(principal, item))
                for item in transactions
            ]
        )

    @unary
    def AbortTransaction(
        self, request: admin_pb2.AbortTransactionRequest, context: grpc.ServicerContext
    ) -> admin_pb2.AbortTransactionResponse:
        principal = principal_of(self.guard, context)
        # The grant names transactional ids; find the one this transaction belongs to.
        owners = [
            item.transactional_id
            for item in self.broker.list_transactions()
            if item.transaction_id == request.transaction_id
        ]
        if self.guard.acl is not None:
            self.guard.require(
                principal, Operation.ABORT, owners or ["*"], Resource.TRANSACTIONAL_ID
            )
        with audited(
            "transaction.abort",
            principal=principal.name,
            peer=context.peer(),
            transaction_id=request.transaction_id,
            transactional_id=owners[0] if owners else None,
        ):
            self.broker.admin_abort_transaction(request.transaction_id)
        return admin_pb2.AbortTransactionResponse()

    @unary
    def DescribeProducers(
        self, request: admin_pb2.DescribeProducersRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DescribeProducersResponse:
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.READ, (request.topic,))  # as Kafka's
        producers = self.access.visible(
            principal, self.broker.describe_producers(request.topic, request.partition)
        )
        return admin_pb2.DescribeProducersResponse(
            producers=[producer_to_proto(item) for item in producers]
        )

    @unary
    def DeleteRecords(
        self, request: admin_pb2.DeleteRecordsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DeleteRecordsResponse:
        principal = principal_of(self.guard, context)
        topics = sorted({asked.partition.topic for asked in request.partitions})
        self.guard.require(principal, Operation.DELETE, topics)  # as Kafka's
        results = []
        for asked in request.partitions:
            topic, index = asked.partition.topic, asked.partition.partition
            result = admin_pb2.RecordsDeleted(
                partition=common_pb2.TopicPartition(topic=topic, partition=index)
            )
            try:  # per partition: one refused does not stop the others
                with audited(
                    "records.delete",
                    principal=principal.name,
                    peer=context.peer(),
                    topic=topic,
                    partition=index,
                    before_offset=asked.before_offset,
                ):
                    result.low_watermark = self.broker.delete_records(
                        topic, index, asked.before_offset
                    )
            except TwinlogError as error:
                result.error.CopyFrom(describe(error).to_proto())
            results.append(result)
        return admin_pb2.DeleteRecordsResponse(results=results)

    @unary
    def ListGroups(
        self, request: admin_pb2.ListGroupsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ListGroupsResponse:
        # As Kafka's ListGroups: only the groups the principal may describe are shown.
        principal = principal_of(self.guard, context)
        listings = [
            listing
            for listing in self.broker.list_groups()
            if self.guard.may_describe(principal, listing.group_id, Resource.GROUP)
        ]
        return admin_pb2.ListGroupsResponse(groups=[listing_to_proto(g) for g in listings])

    @unary
    def DescribeGroup(
        self, request: admin_pb2.DescribeGroupRequest, context: grpc.ServicerContext
    ) -> admin_pb2.GroupDescription:
        principal = principal_of(self.guard, context)
        if not self.guard.may_describe(principal, request.group_id, Resource.GROUP):
            self.guard.require(principal, Operation.DESCRIBE, (request.group_id,), Resource.GROUP)
        return description_to_proto(self.broker.describe_group(request.group_id))

    @unary
    def DeleteGroup(
        self, request: admin_pb2.DeleteGroupRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DeleteGroupResponse:
        principal = principal_of(self.guard, context)
        self.guard.require(principal, Operation.DELETE, (request.group_id,), Resource.GROUP)
        with audited(
            "group.delete", principal=principal.name, peer=context.peer(), group=request.group_id
        ):
            self.broker.delete_group(request.group_id)
        return admin_pb2.DeleteGroupResponse()

    @unary
    def DeleteGroupOffsets(
        self, request: admin_pb2.DeleteGroupOffsetsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DeleteGroupOffsetsResponse:
        # As the Kafka door's OffsetDelete: DELETE on the group for the call, READ on each
        # topic for its partitions (a refusal is audited as acl.denied by require()).
        principal = principal_of(self.guard, context)
        group_id = request.group_id
        self.guard.require(principal, Operation.DELETE, (group_id,), Resource.GROUP)
        asked = [TopicPartition(p.topic, p.partition) for p in request.partitions]
        refused: dict[str, TwinlogError] = {}
        for topic in sorted({p.topic for p in asked}):
            try:
                self.guard.require(principal, Operation.READ, (topic,))
            except TwinlogError as error:
                refused[topic] = error
        answers: dict[TopicPartition, TwinlogError | None] = {}
        wanted = [p for p in asked if p.topic not in refused]
        if wanted:
            with audited(
                "group.offsets.delete",
                principal=principal.name,
                peer=context.peer(),
                group=group_id,
                partitions=",".join(map(str, wanted)),
            ):
                answers = self.broker.delete_offsets(group_id, wanted)
        results = []
        for partition in asked:
            result = admin_pb2.GroupOffsetDeleted(
                partition=common_pb2.TopicPartition(
                    topic=partition.topic, partition=partition.partition
                )
            )
            refusal = refused.get(partition.topic) or answers.get(partition)
            if refusal is not None:
                result.error.CopyFrom(describe(refusal).to_proto())
            results.append(result)
        return admin_pb2.DeleteGroupOffsetsResponse(results=results)

    @unary
    def Metadata(
        self, request: admin_pb2.MetadataRequest, context: grpc.ServicerContext
    ) -> admin_pb2.MetadataResponse:
        principal_of(self.guard, context)
        return metadata_to_proto(self.metadata_source.metadata(list(request.topics) or None))

    @unary
    def FindCoordinator(
        self, request: admin_pb2.FindCoordinatorRequest, context: grpc.ServicerContext
    ) -> admin_pb2.FindCoordinatorResponse:
        principal = principal_of(self.guard, context)
        key_type = key_type_from_proto(request.key_type)
        resource = {
            CoordinatorKeyType.TRANSACTION: Resource.TRANSACTIONAL_ID,
            CoordinatorKeyType.GROUP: Resource.GROUP,
        }.get(key_type)
        if resource is not None and not self.guard.may_describe(principal, request.key, resource):
            # refused: require() audits it and names the grant that would allow it
            self.guard.require(principal, Operation.DESCRIBE, (request.key,), resource)
        return coordinator_to_proto(self.coordinator_source.find(key_type, request.key))
