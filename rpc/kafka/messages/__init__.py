"""The Kafka messages the codec (kafka-python's ``kafka.protocol``) has not, defined with its
own machinery from Kafka's message schemas (the JSON files here: the wire fields of each
version, in the schema language of Kafka's ``clients/.../common/message``).

KIP-848's ConsumerGroupHeartbeat (key 68: v0 as 3.8.0 has it, and v1, Kafka 4.0's, which
adds SubscribedTopicRegex and which librdkafka 2.10+ requires) and ConsumerGroupDescribe
(key 69, v0). A test pins their encoding against bytes laid out by hand from the schema.
"""

from __future__ import annotations

import sys

from kafka.protocol.api_message import ApiMessage

# The package whose JSON files the codec reads (its metaclass takes the keyword, which the
# codec's type stubs do not declare).
_HERE = sys.modules[__name__]


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
]
