"""Every read option, parsed and checked once on the driver into one picklable value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from twinlog.connectors.spark.errors import OptionError
from twinlog.connectors.spark.offsets import (
    OffsetSpec,
    ending_spec,
    starting_spec,
    timestamp_strategy,
)
from twinlog.connectors.spark.options import (
    FETCH_BYTES_DEFAULT,
    READ_OPTIONS,
    Connection,
    Options,
    parse_connection,
)
from twinlog.connectors.spark.subscription import Subscription, parse_subscription


@dataclass(frozen=True)
class ReadSettings:
    connection: Connection
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None  # None: a stream
    timestamp_strategy: str  # "error" or "latest"
    fail_on_data_loss: bool
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    include_headers: bool
    fetch_max_bytes: int


def parse_read_settings(raw: Mapping[str, str], streaming: bool) -> ReadSettings:
    options = Options(raw, READ_OPTIONS)
    fetch_max_bytes = options.integer("fetchMaxBytes", FETCH_BYTES_DEFAULT)
    assert fetch_max_bytes is not None
    max_offsets = options.integer("maxOffsetsPerTrigger", None)
    if max_offsets is not None and not streaming:
        raise OptionError(
            "maxOffsetsPerTrigger",
            "is for streaming queries (spark.readStream); a batch query reads its whole range",
        )
    return ReadSettings(
        connection=parse_connection(options, allow_path=True),
        subscription=parse_subscription(options),
        starting=starting_spec(options, streaming),
        ending=ending_spec(options, streaming),
        timestamp_strategy=timestamp_strategy(options),
        fail_on_data_loss=options.boolean("failOnDataLoss", True),
        min_partitions=options.integer("minPartitions", None),
        max_offsets_per_trigger=max_offsets,
        include_headers=options.boolean("includeHeaders", False),
        fetch_max_bytes=fetch_max_bytes,
    )
