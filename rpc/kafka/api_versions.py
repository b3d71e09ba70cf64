"""ApiVersions: which API keys and versions this listener serves (KIP-511 for the rest).

A client that asks in a version above ours gets a v0 answer with UNSUPPORTED_VERSION and
the whole table, from which it picks a version both know (``dispatch`` encodes it).
"""

from __future__ import annotations

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from twinlog.rpc.kafka.context import KafkaContext
from twinlog.rpc.kafka.error_codes import NONE


def api_versions_response(
    context: KafkaContext, version: int, error_code: int = NONE
) -> ApiVersionsResponse:
    entries = [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted(context.advertised_versions.items())
    ]
    return ApiVersionsResponse(
        version=version, error_code=error_code, api_keys=entries, throttle_time_ms=0
    )


def handle_api_versions(
    request: ApiVersionsRequest, version: int, context: KafkaContext
) -> ApiVersionsResponse:
    return api_versions_response(context, version)
