"""``ProducerConfig``: a ``Producer``'s settings, checked by their rules table.

``Producer.__init__`` builds one from its arguments (their defaults are this class's)
and reads its settings from it; a refusal is one line naming the setting, the value and
what is allowed (``engine.base.config_rules``):

    producer config linger_ms is -1, expected 0 or more
    producer config batch_bytes_max is 1024, expected at least batch_bytes (16384): ...

``delivery_timeout_ms`` and ``transaction_timeout_ms`` may be None (a default is
chosen). The rules between settings are checked after the table, in the same words:
the buffer holds a batch, the hard limit of a batch is at least the size
batches aim at, and a record may wait its linger and one whole request before it expires
(Kafka refuses a delivery timeout below that too).
"""

from __future__ import annotations

from dataclasses import dataclass

from twinlog.engine.base.config_rules import NON_NEGATIVE, POSITIVE, ConfigRules, OneOf, Optional
from twinlog.engine.base.units import KIBIBYTE, MEBIBYTE
from twinlog.engine.log.config import BATCH_BYTES_MAX_DEFAULT
from twinlog.rpc.client.connection_options import RULES as CONNECTION_RULES
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.timeouts import DEFAULT_API_TIMEOUT_MS

# Kafka's compression.type values; every Kafka client and twinlog reader reads each.
COMPRESSIONS = ("zstd", "lz4", "snappy", "gzip", "none")


@dataclass(frozen=True)
class ProducerConfig:
    compression: str = "zstd"
    linger_ms: int = 5
    batch_bytes: int = 256 * KIBIBYTE  # the size a batch aims at
    # The largest batch (so record) sent: the server's default limit, so that a record
    # the server would refuse is refused before it is queued.
    batch_bytes_max: int = BATCH_BYTES_MAX_DEFAULT
    buffer_bytes_max: int = 32 * MEBIBYTE
    max_block_ms: int = 60_000
    delivery_timeout_ms: int | None = None  # None: 120000, or linger + request if more
    transaction_timeout_ms: int | None = None  # None: the broker's default
    default_api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS
    # The connection's, by its rule; a delivery timeout must cover it.
    request_timeout_ms: int = ConnectionOptions.request_timeout_ms

    def __post_init__(self) -> None:
        RULES.check(self)
        if self.buffer_bytes_max < self.batch_bytes:
            raise RULES.refuse(
                "buffer_bytes_max",
                self.buffer_bytes_max,
                f"at least batch_bytes ({self.batch_bytes}): the buffer holds one batch at least",
            )
        if self.batch_bytes_max < self.batch_bytes:
            raise RULES.refuse(
                "batch_bytes_max",
                self.batch_bytes_max,
                f"at least batch_bytes ({self.batch_bytes}): batch_bytes is the size batches "
                "aim at, batch_bytes_max the hard limit",
            )
        floor_ms = self.linger_ms + self.request_timeout_ms
        if self.delivery_timeout_ms is not None and self.delivery_timeout_ms < floor_ms:
            raise RULES.refuse(
                "delivery_timeout_ms",
                self.delivery_timeout_ms,
                f"at least linger_ms ({self.linger_ms}) + request_timeout_ms "
                f"({self.request_timeout_ms}) = {floor_ms}: a record must be able to wait its "
                "linger and one whole request; raise delivery_timeout_ms or lower "
                "request_timeout_ms",
            )


RULES = ConfigRules(
    "producer config",
    {
        "compression": OneOf(COMPRESSIONS),
        "linger_ms": NON_NEGATIVE,
        "batch_bytes": POSITIVE,
        "batch_bytes_max": POSITIVE,  # and at least batch_bytes, above
        "buffer_bytes_max": POSITIVE,  # and at least batch_bytes, above
        "max_block_ms": NON_NEGATIVE,
        "default_api_timeout_ms": POSITIVE,
        "request_timeout_ms": CONNECTION_RULES.rules["request_timeout_ms"],
        # and the delivery timeout at least linger + request, above
        "delivery_timeout_ms": Optional(POSITIVE, "the default"),
        "transaction_timeout_ms": Optional(POSITIVE, "the default"),
    },
)
