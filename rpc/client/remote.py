"""``RemoteBroker``: the broker API over gRPC, raising the engine's own exceptions.

Every method has the signature of the embedded ``twinlog.Broker``'s; a failed
call raises the exception class the server's broker raised (``twinlog.rpc.wire.errors``).
``open_produce_stream()`` gives a pipelined producer channel.

Every call has a gRPC deadline: ``request_timeout_ms`` (a long poll adds its wait),
cut to the deadline of the client call it is part of (``call_deadline``). The channel
sends keepalive pings, so that a server that stops answering (paused, partitioned)
breaks the connection within about ``KEEPALIVE_TIME_MS + KEEPALIVE_TIMEOUT_MS`` even
when no call is waiting, instead of leaving it open forever.

Thread rule: every method may be called from any thread (one gRPC channel,
shared).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

import grpc

from twinlog.engine.base.cluster_metadata import ClusterMetadata
from twinlog.engine.base.errors import InvalidConfigError, TwinlogError
from twinlog.engine.base.types import (
    FetchResult,
    ProducerDescription,
    ProduceResult,
    ProducerIdentity,
    TopicDescription,
    TopicPartition,
    TransactionDescription,
)
from twinlog.engine.broker.leader_elections import ElectionResult
from twinlog.engine.broker.reassignments import MoveResult, PartitionMove, Reassignment
from twinlog.engine.groups.group_calls import (
    OUTSIDE_ANY_GROUP,
    GroupDescription,
    GroupHeartbeat,
    GroupHeartbeatAnswer,
    GroupListing,
    GroupMemberRef,
)
from twinlog.engine.records.batch_format import NO_PARTITION_LEADER_EPOCH, NO_TRANSACTION_ID
from twinlog.rpc.client.call_deadline import request_timeout_s
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.produce_stream import ProduceStream
from twinlog.rpc.client.request_size import (
    MESSAGE_BYTES_MAX,
    check_produce_size,
    check_request_size,
)
from twinlog.rpc.generated.twinlog.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    common_pb2,
    consume_pb2,
    consume_pb2_grpc,
    produce_pb2,
    produce_pb2_grpc,
)
from twinlog.rpc.policy.acl_bindings import AclEntry
from twinlog.rpc.policy.acl_proto import entry_of_proto, entry_to_proto
from twinlog.rpc.wire.broker_api import CoordinatorKeyType, FoundCoordinator
from twinlog.rpc.wire.cluster_convert import (
    KEY_TYPE_TO_PROTO,
    coordinator_from_proto,
    metadata_from_proto,
)
from twinlog.rpc.wire.convert import (
    counts_to_proto,
    election_from_proto,
    offsets_from_proto,
    offsets_to_proto,
    producer_from_proto,
    topic_from_proto,
    topic_partitions_to_proto,
    transaction_from_proto,
    wire_transaction_id,
    with_leader_epoch,
)
from twinlog.rpc.wire.errors import error_from_proto, error_from_rpc_error
from twinlog.rpc.wire.group_convert import (
    answer_from_proto,
    description_from_proto,
    heartbeat_to_proto,
    listing_from_proto,
    member_to_proto,
)
from twinlog.rpc.wire.metadata import AUTHORIZATION_KEY
from twinlog.rpc.wire.reassignment_convert import (
    move_result_from_proto,
    moves_to_proto,
    reassignment_from_proto,
)

Result = TypeVar("Result")

# Keepalive (grpc core's doc/keepalive.md): a ping after this long without traffic...
KEEPALIVE_TIME_MS = 10_000
# ...must be acknowledged within this long, or the connection is closed (its calls fail
# with BrokerUnavailableError, retriable) and opened again.
KEEPALIVE_TIMEOUT_MS = 5_000
KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    # An idle producer or consumer must learn of a dead server too, not only a busy one.
    ("grpc.keepalive_permit_without_calls", 1),
    # 0: no limit on pings between data frames (the default stops after two).
    ("grpc.http2.max_pings_without_data", 0),
)


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise InvalidConfigError(f"cannot read {what} {path}: {error.strerror}") from None


def open_channel(target: str, options: ConnectionOptions) -> grpc.Channel:
    channel_options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", MESSAGE_BYTES_MAX),
        ("grpc.max_send_message_length", MESSAGE_BYTES_MAX),
        *KEEPALIVE_OPTIONS,
    ]
    if not options.uses_tls:
        return grpc.insecure_channel(target, options=channel_options)
    if options.tls_server_name:
        channel_options.append(("grpc.ssl_target_name_override", options.tls_server_name))
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(options.tls_ca_file, "TLS CA file")
        if options.tls_ca_file
        else None,
        private_key=_read(options.tls_key_file, "TLS key file") if options.tls_key_file else None,
        certificate_chain=(
            _read(options.tls_cert_file, "TLS certificate file") if options.tls_cert_file else None
        ),
    )
    return grpc.secure_channel(target, credentials, options=channel_options)


class RemoteBroker:
    def __init__(self, target: str, options: ConnectionOptions | None = None) -> None:
        self.target = target
        self.options = options or ConnectionOptions()
        token = self.options.resolved_token()
        self.metadata: tuple[tuple[str, str], ...] = (
            ((AUTHORIZATION_KEY, f"Bearer {token}"),) if token else ()
        )
        self.timeout_s = self.options.request_timeout_ms / 1000
        self.channel = open_channel(target, self.options)
        self.producing = produce_pb2_grpc.ProducingStub(self.channel)
        self.consuming = consume_pb2_grpc.ConsumingStub(self.channel)
        self.administration = admin_pb2_grpc.AdministrationStub(self.channel)
        self._standalone: bool | None = None  # is the server a single node? (asked once)

    def __repr__(self) -> str:
        return f"RemoteBroker({self.target!r})"

    def _call(
        self, method: Callable[..., Result], request: Any, timeout_s: float | None = None
    ) -> Result:
        if not isinstance(request, produce_pb2.ProduceRequest):  # produce() checked its batch
            check_request_size(request)
        timeout = request_timeout_s(timeout_s or self.timeout_s)
        try:
            return method(request, timeout=timeout, metadata=self.metadata)
        except grpc.RpcError as error:
            raise error_from_rpc_error(error) from None

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> RemoteBroker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- topics ---------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> TopicDescription:
        request = admin_pb2.CreateTopicRequest(
            name=name,
            partitions=partitions,
            config={str(k): str(v) for k, v in (config or {}).items()},
        )
        return topic_from_proto(self._call(self.administration.CreateTopic, request))

    def alter_topic_config(
        self,
        name: str,
        set_values: Mapping[str, str],
        deleted: Sequence[str] = (),
        *,
        validate_only: bool = False,
    ) -> TopicDescription:
        request = admin_pb2.AlterTopicConfigRequest(
            name=name, set=dict(set_values), delete=list(deleted), validate_only=validate_only
        )
        return topic_from_proto(self._call(self.administration.AlterTopicConfig, request))

    def create_partitions(
        self, name: str, partitions: int, *, validate_only: bool = False
    ) -> TopicDescription:
        request = admin_pb2.CreatePartitionsRequest(
            name=name, partitions=partitions, validate_only=validate_only
        )
        return topic_from_proto(self._call(self.administration.CreatePartitions, request))

    def delete_topic(self, name: str) -> None:
        self._call(self.administration.DeleteTopic, admin_pb2.DeleteTopicRequest(name=name))

    def list_topics(self) -> list[str]:
        response = self._call(self.administration.ListTopics, admin_pb2.ListTopicsRequest())
        return list(response.names)

    def elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None, timeout_ms: int
    ) -> list[ElectionResult]:
        request = admin_pb2.ElectLeadersRequest(
            partitions=[
                common_pb2.TopicPartition(topic=t, partition=p) for t, p in partitions or ()
            ],
            timeout_ms=timeout_ms,
        )
        # The broker waits up to timeout_ms for the controller: the call's deadline is later.
        response = self._call(
            self.administration.ElectLeaders, request, timeout_ms / 1000 + self.timeout_s
        )
        return [election_from_proto(item) for item in response.results]

    def reassign_partitions(
        self, moves: Sequence[PartitionMove], throttle_bytes_per_s: int, timeout_ms: int
    ) -> list[MoveResult]:
        request = admin_pb2.ReassignPartitionsRequest(
            moves=moves_to_proto(moves),
            throttle_bytes_per_s=throttle_bytes_per_s,
            timeout_ms=timeout_ms,
        )
        # The broker waits up to timeout_ms for the controller: the call's deadline is later.
        response = self._call(
            self.administration.ReassignPartitions, request, timeout_ms / 1000 + self.timeout_s
        )
        return [move_result_from_proto(item) for item in response.results]

    def partition_reassignments(self) -> list[Reassignment]:
        request = admin_pb2.ListPartitionReassignmentsRequest()
        response = self._call(self.administration.ListPartitionReassignments, request)
        return [reassignment_from_proto(item) for item in response.reassignments]

    def shutdown_broker(self, broker_id: int) -> None:
        """Stop the broker this client reaches, which must be ``broker_id`` (not part of
        ``BrokerApi``: an embedded broker is stopped by its own process)."""
        self._call(
            self.administration.ShutdownBroker, admin_pb2.ShutdownBrokerRequest(broker_id=broker_id)
        )

    def set_scram_credential(
        self, user: str, mechanism: str, iterations: int, salt: bytes, salted_password: bytes
    ) -> None:
        """Set ``user``'s SCRAM credential for ``mechanism`` from its SaltedPassword (the
        password itself never leaves the caller). Needs ALTER on the cluster."""
        request = admin_pb2.SetScramCredentialRequest(
            user=user,
            mechanism=mechanism,
            iterations=iterations,
            salt=salt,
            salted_password=salted_password,
        )
        self._call(self.administration.SetScramCredential, request)

    def delete_scram_credential(self, user: str, mechanism: str) -> None:
        request = admin_pb2.DeleteScramCredentialRequest(user=user, mechanism=mechanism)
        self._call(self.administration.DeleteScramCredential, request)

    def scram_users(self) -> dict[str, list[tuple[str, int]]]:
        """Every SCRAM user's (mechanism, iterations): nothing secret."""
        response = self._call(self.administration.ListScramUsers, admin_pb2.ListScramUsersRequest())
        return {
            item.user: list(zip(item.mechanisms, item.iterations, strict=True))
            for item in response.users
        }

    def list_acls(
        self, principal: str | None = None, resource_type: str | None = None
    ) -> list[AclEntry]:
        """The grants in force (the ACL file's and the store's). Needs DESCRIBE on the cluster."""
        request = admin_pb2.ListAclsRequest(principal=principal, resource_type=resource_type)
        response = self._call(self.administration.ListAcls, request)
        return [entry_of_proto(grant) for grant in response.grants]

    def create_acls(self, entries: list[AclEntry]) -> list[AclEntry]:
        """Store these grants; the ones not stored already. Needs ALTER on the cluster."""
        request = admin_pb2.CreateAclsRequest(grants=[entry_to_proto(e) for e in entries])
        response = self._call(self.administration.CreateAcls, request)
        return [entry_of_proto(grant) for grant in response.created]

    def delete_acls(self, entries: list[AclEntry]) -> list[AclEntry]:
        """Remove these stored grants. Needs ALTER on the cluster."""
        request = admin_pb2.DeleteAclsRequest(grants=[entry_to_proto(e) for e in entries])
        response = self._call(self.administration.DeleteAcls, request)
        return [entry_of_proto(grant) for grant in response.deleted]

    def topic_settings(self, name: str) -> list[tuple[str, str, bool]]:
        request = admin_pb2.DescribeTopicRequest(name=name)
        response = self._call(self.administration.DescribeTopicSettings, request)
        return [(item.name, item.value, item.set_on_topic) for item in response.settings]

    def describe_topic(self, name: str) -> TopicDescription:
        request = admin_pb2.DescribeTopicRequest(name=name)
        return topic_from_proto(self._call(self.administration.DescribeTopic, request))

    def auto_create_topic(
        self, name: str, creating: Callable[[], AbstractContextManager[object]] | None = None
    ) -> TopicDescription:
        """The server checks the caller's CREATE and audits: ``creating`` is not used."""
        request = admin_pb2.DescribeTopicRequest(name=name, allow_auto_topic_creation=True)
        return topic_from_proto(self._call(self.administration.DescribeTopic, request))

    # --- producing ---------------------------------------------------------------------

    def init_producer(
        self, transactional_id: str | None = None, transaction_timeout_ms: int | None = None
    ) -> ProducerIdentity:
        request = produce_pb2.InitProducerRequest(
            transactional_id=transactional_id or "",
            transaction_timeout_ms=transaction_timeout_ms or 0,
        )
        response = self._call(self.producing.InitProducer, request)
        return ProducerIdentity(response.producer_id, response.producer_generation)

    def produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        attempt: str = "",
        transaction_id: int = NO_TRANSACTION_ID,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> ProduceResult:
        check_produce_size(topic, batch)
        request = produce_pb2.ProduceRequest(
            topic=topic,
            partition=partition,
            batch=batch,
            attempt=attempt,
            transaction_id=wire_transaction_id(transaction_id),
        )
        with_leader_epoch(request, current_leader_epoch)
        response = self._call(self.producing.Produce, request)
        return ProduceResult(response.base_offset, response.duplicate)

    def open_produce_stream(self) -> ProduceStream:
        return ProduceStream(
            self.producing.ProduceStream,
            self.metadata,
            unary=self.producing.Produce,
            request_timeout_s=self.timeout_s,
        )

    def begin_transaction(
        self, producer_id: int, producer_generation: int, request_id: int = 0
    ) -> int:
        request = produce_pb2.BeginTransactionRequest(
            producer_id=producer_id, producer_generation=producer_generation, request_id=request_id
        )
        return int(self._call(self.producing.BeginTransaction, request).transaction_id)

    @staticmethod
    def _ref(
        transaction_id: int, producer_id: int, producer_generation: int
    ) -> produce_pb2.TransactionRef:
        return produce_pb2.TransactionRef(
            transaction_id=transaction_id,
            producer_id=producer_id,
            producer_generation=producer_generation,
        )

    def add_partitions_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        partitions: Iterable[TopicPartition],
    ) -> None:
        request = produce_pb2.AddPartitionsToTransactionRequest(
            transaction=self._ref(transaction_id, producer_id, producer_generation),
            partitions=topic_partitions_to_proto(partitions),
        )
        self._call(self.producing.AddPartitionsToTransaction, request)

    def send_offsets_to_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None:
        request = produce_pb2.SendOffsetsToTransactionRequest(
            transaction=self._ref(transaction_id, producer_id, producer_generation),
            group_id=group_id,
            offsets=offsets_to_proto(offsets),
            member=member_to_proto(member),
        )
        self._call(self.producing.SendOffsetsToTransaction, request)

    def commit_transaction(
        self,
        transaction_id: int,
        producer_id: int,
        producer_generation: int,
        wait_for_applied: bool = False,
        attempts: Iterable[str] | None = None,
        batches_written: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        request = produce_pb2.EndTransactionRequest(
            transaction=self._ref(transaction_id, producer_id, producer_generation),
            wait_for_applied=wait_for_applied,
            select_attempts=attempts is not None,
            attempts=list(attempts or ()),
            batches_written=counts_to_proto(batches_written or {}),
        )
        self._call(self.producing.CommitTransaction, request)

    def abort_transaction(
        self, transaction_id: int, producer_id: int, producer_generation: int
    ) -> None:
        request = produce_pb2.EndTransactionRequest(
            transaction=self._ref(transaction_id, producer_id, producer_generation)
        )
        self._call(self.producing.AbortTransaction, request)

    # --- consuming ---------------------------------------------------------------------

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> FetchResult:
        request = consume_pb2.FetchRequest(
            topic=topic,
            partition=partition,
            offset=offset,
            max_bytes=max_bytes,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
        )
        with_leader_epoch(request, current_leader_epoch)
        response = self._call(
            self.consuming.Fetch, request, timeout_s=self.timeout_s + max_wait_ms / 1000
        )
        return FetchResult(response.records, response.log_start_offset, response.log_end_offset)

    def list_offset(self, topic: str, partition: int, spec: str | int) -> int:
        request = consume_pb2.ListOffsetRequest(topic=topic, partition=partition)
        if spec == "earliest":
            request.position = consume_pb2.ListOffsetRequest.POSITION_EARLIEST
        elif spec == "latest":
            request.position = consume_pb2.ListOffsetRequest.POSITION_LATEST
        elif isinstance(spec, int) and not isinstance(spec, bool):
            request.timestamp_ms = spec
        else:
            raise InvalidConfigError(
                f"offset spec {spec!r} is not 'earliest', 'latest' or a timestamp in ms"
            )
        return int(self._call(self.consuming.ListOffset, request).offset)

    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        member: GroupMemberRef = OUTSIDE_ANY_GROUP,
    ) -> None:
        request = consume_pb2.CommitOffsetsRequest(
            group_id=group_id, offsets=offsets_to_proto(offsets), member=member_to_proto(member)
        )
        self._call(self.consuming.CommitOffsets, request)

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        request = consume_pb2.FetchOffsetsRequest(
            group_id=group_id, partitions=topic_partitions_to_proto(partitions)
        )
        return offsets_from_proto(self._call(self.consuming.FetchOffsets, request).offsets)

    # --- consumer groups -----------------------------------------------------------------

    def group_heartbeat(self, call: GroupHeartbeat) -> GroupHeartbeatAnswer:
        response = self._call(self.consuming.GroupHeartbeat, heartbeat_to_proto(call))
        return answer_from_proto(response)

    def list_groups(self) -> list[GroupListing]:
        response = self._call(self.administration.ListGroups, admin_pb2.ListGroupsRequest())
        return [listing_from_proto(item) for item in response.groups]

    def describe_group(self, group_id: str) -> GroupDescription:
        request = admin_pb2.DescribeGroupRequest(group_id=group_id)
        return description_from_proto(self._call(self.administration.DescribeGroup, request))

    def delete_group(self, group_id: str) -> None:
        request = admin_pb2.DeleteGroupRequest(group_id=group_id)
        self._call(self.administration.DeleteGroup, request)

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, TwinlogError | None]:
        request = admin_pb2.DeleteGroupOffsetsRequest(
            group_id=group_id,
            partitions=[
                common_pb2.TopicPartition(topic=topic, partition=partition)
                for topic, partition in partitions
            ],
        )
        response = self._call(self.administration.DeleteGroupOffsets, request)
        return {
            TopicPartition(result.partition.topic, result.partition.partition): (
                error_from_proto(result.error) if result.HasField("error") else None
            )
            for result in response.results
        }

    # --- admin ---------------------------------------------------------------------------

    def list_transactions(self) -> list[TransactionDescription]:
        response = self._call(
            self.administration.ListTransactions, admin_pb2.ListTransactionsRequest()
        )
        return [transaction_from_proto(item) for item in response.transactions]

    def admin_abort_transaction(self, transaction_id: int) -> None:
        request = admin_pb2.AbortTransactionRequest(transaction_id=transaction_id)
        self._call(self.administration.AbortTransaction, request)

    def describe_producers(self, topic: str, partition: int) -> list[ProducerDescription]:
        request = admin_pb2.DescribeProducersRequest(topic=topic, partition=partition)
        response = self._call(self.administration.DescribeProducers, request)
        return [producer_from_proto(item) for item in response.producers]

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        request = admin_pb2.DeleteRecordsRequest(
            partitions=[
                admin_pb2.RecordsDeletion(
                    partition=common_pb2.TopicPartition(topic=topic, partition=partition),
                    before_offset=before_offset,
                )
            ]
        )
        response = self._call(self.administration.DeleteRecords, request)
        (result,) = response.results
        if result.HasField("error"):  # raised as the unary call's error would be
            raise error_from_proto(result.error)
        return result.low_watermark

    def cluster_metadata(
        self, topics: Iterable[str] | None = None, timeout_ms: int | None = None
    ) -> ClusterMetadata:
        """Who leads what, as this server knows it (not part of ``BrokerApi``: the embedded
        broker has no cluster). ``topics`` None: every topic. ``timeout_ms`` (default
        ``request_timeout_ms``) bounds this one request."""
        request = admin_pb2.MetadataRequest(topics=sorted(set(topics or ())))
        timeout_s = None if timeout_ms is None else timeout_ms / 1000
        return metadata_from_proto(self._call(self.administration.Metadata, request, timeout_s))

    def coordinator_leads(self, producer_id: int, partitions: Sequence[TopicPartition]) -> bool:
        """``CoordinatorPlacement``: a single node coordinates every transaction and leads
        every partition; a cluster broker reached alone is not assumed to (asked once, with
        the partitions' topics: a Metadata call; a refusal that will not pass, such as an
        ACL's, is kept as "cannot tell", so no later flush asks again)."""
        if self._standalone is None:
            try:
                topics = sorted({topic for topic, _partition in partitions})
                self._standalone = self.cluster_metadata(topics).standalone
            except TwinlogError as error:
                if not error.retriable:
                    self._standalone = False
                return False  # cannot tell now: adding them first is the safe choice
        return self._standalone

    def find_coordinator(self, key_type: CoordinatorKeyType, key: str) -> FoundCoordinator | None:
        """The coordinator of ``key`` (Kafka's FindCoordinator; not part of ``BrokerApi``):
        a transactional id (TRANSACTION), a producer or transaction id (PRODUCER_ID, in
        decimal) or a group (GROUP). None when this server has no FindCoordinator call (an
        older server: it coordinates whatever it is sent). Raises NotCoordinatorError
        (retriable) while no broker coordinates the key."""
        request = admin_pb2.FindCoordinatorRequest(key_type=KEY_TYPE_TO_PROTO[key_type], key=key)
        check_request_size(request)
        timeout = request_timeout_s(self.timeout_s)
        try:
            response = self.administration.FindCoordinator(
                request, timeout=timeout, metadata=self.metadata
            )
        except grpc.RpcError as error:
            # No twinlog error travels as UNIMPLEMENTED: only a server without the method.
            if error.code() is grpc.StatusCode.UNIMPLEMENTED:
                return None
            raise error_from_rpc_error(error) from None
        return coordinator_from_proto(response)
