"""From a request frame to its answer: the table of served APIs, decoding, encoding.

Every message is decoded and encoded by kafka-python's ``kafka.protocol`` classes
(generated from Kafka's JSON schemas), including the request and response headers and
their flexible (tagged) forms. What is not served gets a clean error:

- ApiVersions in a version above ours: a v0 answer with UNSUPPORTED_VERSION and our
  table (KIP-511), from which the client picks a version;
- another API in a version we do not serve, or an API we do not serve at all that the
  codec knows and whose answer has a top-level error code (DescribeAcls, DescribeCluster,
  ListTransactions, ...): that answer with UNSUPPORTED_VERSION;
- anything else (an API key the codec does not know, bytes that do not decode, a null
  where the schema allows none: ``request_checks``): the connection is closed, with a
  log line saying why, as a Kafka broker does.
"""

from __future__ import annotations

import io
import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer
import kafka.protocol.sasl
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ListPartitionReassignmentsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import (
    FetchRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from twinlog.rpc.kafka.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from twinlog.rpc.kafka.alter_configs import handle_alter_configs, handle_incremental_alter_configs
from twinlog.rpc.kafka.answer_errors import error_names
from twinlog.rpc.kafka.api_versions import api_versions_response, handle_api_versions
from twinlog.rpc.kafka.consumer_group_describe import handle_consumer_group_describe
from twinlog.rpc.kafka.consumer_group_heartbeat import handle_consumer_group_heartbeat
from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.create_partitions import handle_create_partitions
from twinlog.rpc.kafka.delete_records import handle_delete_records
from twinlog.rpc.kafka.describe_cluster import handle_describe_cluster
from twinlog.rpc.kafka.describe_configs import handle_describe_configs
from twinlog.rpc.kafka.describe_log_dirs import handle_describe_log_dirs
from twinlog.rpc.kafka.describe_producers import handle_describe_producers
from twinlog.rpc.kafka.describe_transactions import handle_describe_transactions
from twinlog.rpc.kafka.elect_leaders import handle_elect_leaders
from twinlog.rpc.kafka.error_codes import NONE, UNKNOWN_SERVER_ERROR, UNSUPPORTED_VERSION
from twinlog.rpc.kafka.fetch import handle_fetch
from twinlog.rpc.kafka.find_coordinator import handle_find_coordinator
from twinlog.rpc.kafka.group_listing import (
    handle_delete_groups,
    handle_describe_groups,
    handle_list_groups,
)
from twinlog.rpc.kafka.groups import (
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_sync_group,
)
from twinlog.rpc.kafka.list_offsets import handle_list_offsets
from twinlog.rpc.kafka.list_transactions import handle_list_transactions
from twinlog.rpc.kafka.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from twinlog.rpc.kafka.metadata import handle_metadata
from twinlog.rpc.kafka.offset_delete import handle_offset_delete
from twinlog.rpc.kafka.offset_for_leader_epoch import handle_offset_for_leader_epoch
from twinlog.rpc.kafka.offsets import handle_offset_commit, handle_offset_fetch
from twinlog.rpc.kafka.partition_reassignments import (
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
)
from twinlog.rpc.kafka.produce import handle_produce
from twinlog.rpc.kafka.request_checks import null_where_forbidden
from twinlog.rpc.kafka.sasl import handle_sasl_authenticate, handle_sasl_handshake
from twinlog.rpc.kafka.topics import handle_create_topics, handle_delete_topics
from twinlog.rpc.kafka.transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_end_txn,
    handle_init_producer_id,
    handle_txn_offset_commit,
)
from twinlog.rpc.kafka.user_scram_credentials import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from twinlog.rpc.kafka.versions import versions_of
from twinlog.rpc.policy.audit import audit_scope
from twinlog.rpc.policy.structured_log import log_event
from twinlog.rpc.server.request_observer import request_log

log = logging.getLogger("twinlog.kafka")

Handler = Callable[[Any, int, KafkaContext], ApiMessage | None]


@dataclass(frozen=True)
class Api:
    request_class: type[ApiMessage]
    handler: Handler

    @property
    def min_version(self) -> int:
        return versions_of(self.request_class.API_KEY)[0]

    @property
    def max_version(self) -> int:
        return versions_of(self.request_class.API_KEY)[1]


# The APIs served, each in every version Kafka KAFKA_RELEASE serves (``versions``).
SERVED_APIS: tuple[Api, ...] = (
    Api(ProduceRequest, handle_produce),
    Api(FetchRequest, handle_fetch),
    Api(ListOffsetsRequest, handle_list_offsets),
    Api(MetadataRequest, handle_metadata),
    Api(OffsetCommitRequest, handle_offset_commit),
    Api(OffsetFetchRequest, handle_offset_fetch),
    Api(OffsetForLeaderEpochRequest, handle_offset_for_leader_epoch),
    Api(FindCoordinatorRequest, handle_find_coordinator),
    Api(JoinGroupRequest, handle_join_group),
    Api(HeartbeatRequest, handle_heartbeat),
    Api(LeaveGroupRequest, handle_leave_group),
    Api(SyncGroupRequest, handle_sync_group),
    Api(ListGroupsRequest, handle_list_groups),
    Api(DescribeGroupsRequest, handle_describe_groups),
    Api(DeleteGroupsRequest, handle_delete_groups),
    Api(OffsetDeleteRequest, handle_offset_delete),
    Api(ConsumerGroupHeartbeatRequest, handle_consumer_group_heartbeat),
    Api(ConsumerGroupDescribeRequest, handle_consumer_group_describe),
    Api(CreateTopicsRequest, handle_create_topics),
    Api(DeleteTopicsRequest, handle_delete_topics),
    Api(CreatePartitionsRequest, handle_create_partitions),
    Api(DeleteRecordsRequest, handle_delete_records),
    Api(DescribeConfigsRequest, handle_describe_configs),
    Api(DescribeClusterRequest, handle_describe_cluster),
    Api(DescribeLogDirsRequest, handle_describe_log_dirs),
    Api(AlterConfigsRequest, handle_alter_configs),
    Api(IncrementalAlterConfigsRequest, handle_incremental_alter_configs),
    Api(ListTransactionsRequest, handle_list_transactions),
    Api(DescribeTransactionsRequest, handle_describe_transactions),
    Api(DescribeProducersRequest, handle_describe_producers),
    Api(ElectLeadersRequest, handle_elect_leaders),
    Api(AlterPartitionReassignmentsRequest, handle_alter_partition_reassignments),
    Api(ListPartitionReassignmentsRequest, handle_list_partition_reassignments),
    Api(DescribeUserScramCredentialsRequest, handle_describe_user_scram_credentials),
    Api(AlterUserScramCredentialsRequest, handle_alter_user_scram_credentials),
    Api(DescribeAclsRequest, handle_describe_acls),
    Api(CreateAclsRequest, handle_create_acls),
    Api(DeleteAclsRequest, handle_delete_acls),
    # v0 is followed by PLAIN's message outside the requests' framing (the listener reads it)
    Api(SaslHandshakeRequest, handle_sasl_handshake),
    Api(SaslAuthenticateRequest, handle_sasl_authenticate),
    Api(ApiVersionsRequest, handle_api_versions),
    Api(InitProducerIdRequest, handle_init_producer_id),
    Api(AddPartitionsToTxnRequest, handle_add_partitions_to_txn),
    Api(AddOffsetsToTxnRequest, handle_add_offsets_to_txn),
    Api(EndTxnRequest, handle_end_txn),
    Api(TxnOffsetCommitRequest, handle_txn_offset_commit),
)
API_BY_KEY: dict[int, Api] = {api.request_class.API_KEY: api for api in SERVED_APIS}
# What a connection may send before it has authenticated (when the server has tokens).
BEFORE_AUTHENTICATION = frozenset(
    {ApiVersionsRequest.API_KEY, SaslHandshakeRequest.API_KEY, SaslAuthenticateRequest.API_KEY}
)


def advertised_versions() -> dict[int, tuple[int, int]]:
    return {key: (api.min_version, api.max_version) for key, api in API_BY_KEY.items()}


def _is_request_class(candidate: object) -> bool:
    if not (isinstance(candidate, type) and issubclass(candidate, ApiMessage)):
        return False
    message: Any = candidate
    return getattr(message, "_json", None) is not None and bool(message.is_request())


def _codec_requests() -> dict[int, Any]:
    """Every request class the codec has, by API key (to answer the ones not served)."""
    found: dict[int, Any] = {}
    for module in (
        kafka.protocol.admin,
        kafka.protocol.consumer,
        kafka.protocol.metadata,
        kafka.protocol.producer,
        kafka.protocol.sasl,  # SaslHandshake and SaslAuthenticate
    ):
        for name in dir(module):
            candidate: Any = getattr(module, name)
            if _is_request_class(candidate):
                found[candidate.API_KEY] = candidate
    return found


CODEC_REQUESTS = _codec_requests()


# A request's outcome, as the metrics count it.
ANSWERED = "answered"
ERROR = "error"  # answered with a top-level error code
UNANSWERED = "unanswered"  # a Produce with acks=0
CLOSED = "closed"  # the connection was closed instead
_HEAD = struct.Struct(">hh")  # a request's API key and version, first in its header


class CloseConnection(Exception):
    """The request cannot be answered; the message says why (logged, then the connection
    is closed)."""


def _response_class(request_class: type[ApiMessage]) -> Any:
    module = __import__(request_class.__module__, fromlist=["_"])
    return getattr(module, request_class.__name__.removesuffix("Request") + "Response")


def _error_answer(request_class: type[ApiMessage], version: int, code: int) -> ApiMessage | None:
    """The API's answer carrying ``code`` at its top level, or None when it has no such field
    in ``version`` (or the codec cannot encode that version)."""
    response_class = _response_class(request_class)
    if version > response_class.max_version:
        return None
    field = response_class.fields.get("error_code")
    if field is None or not field.for_version_q(version):
        return None
    answer: ApiMessage = response_class(version=version, error_code=code)
    return answer


def _encode(answer: ApiMessage, correlation_id: int) -> bytes:
    answer.with_header(correlation_id=correlation_id)
    return bytes(answer.encode(header=True, framed=True))


@dataclass
class _Answered:
    """What one request came to, for the metrics and the request log."""

    frame: bytes | None = None  # None: no answer (acks=0, or the connection was closed)
    outcome: str = CLOSED
    errors: tuple[str, ...] = ()  # Kafka's names of the codes the answer carries
    wait_ms: int = 0  # how long the request asked the broker to wait (a Fetch's long poll)


def answer_frame(frame: bytes, context: KafkaContext, peer: str) -> bytes | None:
    """The framed answer to one request frame (without its size prefix); None when the
    request expects no answer (Produce with acks=0). Raises CloseConnection.

    Each request is counted in the metrics and written to the request log (logger
    ``twinlog.request``, as the gRPC door's): one line at DEBUG, at INFO with ``slow=true``
    when it took ``request_log_slow_ms`` or longer beyond the wait it asked for (a Fetch's
    long poll is not slow). What the request changes or is refused is audited with
    ``door=kafka`` and the client's address."""
    started_s = time.monotonic()
    answered = _Answered()
    try:
        with audit_scope(door="kafka", peer=peer):
            _answer_frame(frame, context, peer, answered)
        return answered.frame
    finally:
        _observe(frame, context, peer, answered, time.monotonic() - started_s)


def _observe(
    frame: bytes, context: KafkaContext, peer: str, answered: _Answered, duration_s: float
) -> None:
    api_key, version = _HEAD.unpack_from(frame) if len(frame) >= _HEAD.size else (-1, -1)
    served = API_BY_KEY.get(api_key)
    # Labels from what is served only: a client's int16s must not make series without end.
    api = served.request_class.__name__.removesuffix("Request") if served else "unknown"
    served_version = served is not None and served.min_version <= version <= served.max_version
    version_label = str(version) if served_version else "unsupported"
    bytes_out = len(answered.frame) if answered.frame else 0
    if context.metrics is not None:
        context.metrics.observe_kafka(
            api,
            version_label,
            answered.outcome,
            duration_s,
            len(frame),
            bytes_out,
            answered.errors,
        )
    duration_ms = duration_s * 1000
    slow = duration_ms - answered.wait_ms >= context.request_log_slow_ms
    level = logging.INFO if slow else logging.DEBUG
    if request_log.isEnabledFor(level):
        log_event(
            request_log,
            level,
            "kafka.request",
            api=api,
            version=version,
            principal=context.connection.principal.name,
            peer=peer,
            outcome=answered.outcome,
            duration_ms=round(duration_ms, 1),
            bytes_in=len(frame),
            bytes_out=bytes_out,
            **({"errors": ",".join(answered.errors)} if answered.errors else {}),
            **({"slow": "true"} if slow else {}),
        )


def _answer_frame(frame: bytes, context: KafkaContext, peer: str, answered: _Answered) -> None:
    """``answer_frame``'s answer, and what the metrics count of it, into ``answered``."""
    try:
        header = RequestHeader.decode(io.BytesIO(frame), flexible=False)
    except Exception as error:  # the codec raises plain exceptions on short or bad bytes
        raise CloseConnection(f"a request header that does not decode ({error})") from None
    api_key, version = header.request_api_key, header.request_api_version
    correlation_id = header.correlation_id
    if not context.connection.authenticated and api_key not in BEFORE_AUTHENTICATION:
        raise CloseConnection(
            f"API key {api_key} before SASL authentication (this server has a tokens file: "
            "authenticate with SASL/PLAIN, user = principal, password = token)"
        )
    api = API_BY_KEY.get(api_key)
    if api is None or not api.min_version <= version <= api.max_version:
        unserved = _unserved(api_key, version, context, header.client_id)
        _settle(answered, unserved, correlation_id)
        return
    try:
        request = api.request_class.decode(frame, version=version, header=True)
    except Exception as error:
        raise CloseConnection(
            f"a {api.request_class.__name__} v{version} that does not decode ({error})"
        ) from None
    null_field = null_where_forbidden(request, version)
    if null_field is not None:
        raise CloseConnection(
            f"a {api.request_class.__name__} v{version} with null {null_field}, which its "
            "schema does not allow"
        )
    try:
        answer = api.handler(request, version, context)
    except Exception:
        log.exception("%s v%d from %s failed", api.request_class.__name__, version, peer)
        fallback = _error_answer(api.request_class, version, UNKNOWN_SERVER_ERROR)
        if fallback is None:
            raise CloseConnection(
                f"{api.request_class.__name__} v{version} failed and its answer has no "
                "top-level error code"
            ) from None
        answer = fallback
    answered.wait_ms = max(0, int(getattr(request, "max_wait_ms", 0) or 0))
    if answer is None:
        answered.outcome = UNANSWERED
        return
    _settle(answered, answer, correlation_id)


def _settle(answered: _Answered, answer: ApiMessage, correlation_id: int) -> None:
    answered.errors = error_names(answer)
    answered.frame = _encode(answer, correlation_id)
    answered.outcome = (
        ERROR if getattr(answer, "error_code", NONE) not in (NONE, None) else ANSWERED
    )


def _unserved(
    api_key: int, version: int, context: KafkaContext, client_id: str | None
) -> ApiMessage:
    if api_key == ApiVersionsRequest.API_KEY:  # KIP-511: v0 names what we serve
        return api_versions_response(context, 0, UNSUPPORTED_VERSION)
    request_class = CODEC_REQUESTS.get(api_key)
    served = API_BY_KEY.get(api_key)
    what = (
        f"{request_class.__name__} v{version}" if request_class else f"API key {api_key} v{version}"
    )
    reason = (
        f"versions {served.min_version}-{served.max_version} are served"
        if served
        else "this API is not served (docs/kafka-protocol.md)"
    )
    if request_class is not None:
        answer = _error_answer(request_class, version, UNSUPPORTED_VERSION)
        if answer is not None:
            log.info(
                "%s from client %r: answered UNSUPPORTED_VERSION (%s)", what, client_id, reason
            )
            return answer
    raise CloseConnection(f"{what} from client {client_id!r}: {reason}")
