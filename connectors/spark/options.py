"""Parsing the data source options into typed settings, once, with errors that name the option.

Spark hands a data source its options as strings in a case-insensitive map
(``.option("startingOffsets", ...)`` arrives as ``startingoffsets``). Every
option the connector knows is listed in ``READ_OPTIONS`` / ``WRITE_OPTIONS``
below with its documented spelling; parsing happens on the driver, so a
typo fails the query before any task runs.

Option names follow Spark's Kafka source and sink where they mean the same
thing (``subscribe``, ``startingOffsets``, ``failOnDataLoss``, ...); ``servers``
plays the part of ``kafka.bootstrap.servers``.

The options with a number, a flag or a word for a value are read by the rules of
every twinlog configuration (``engine.base.config_rules``), one per option in
``OPTION_RULES``: text is read as the rule reads it, and a refusal names the option as
documented, the value and what the rule allows:

    twinlog option fetchMaxBytes: is 100, expected 1024 or more
    twinlog option failOnDataLoss: is 'maybe', expected true or false

Options with structured values (JSON offsets, topic lists, a pattern) have their own
parsers (``offsets``, ``subscription``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from twinlog.connectors.spark.errors import OptionError
from twinlog.engine.base.config_rules import NON_NEGATIVE, POSITIVE, Flag, Integer, OneOf, Rule
from twinlog.engine.base.units import MEBIBYTE
from twinlog.engine.log.config import BATCH_BYTES_MAX_DEFAULT
from twinlog.engine.records.compression import CODEC_BY_NAME
from twinlog.rpc.client.connection import ConnectionOptions
from twinlog.rpc.client.connection_options import RULES as CONNECTION_RULES

FETCH_BYTES_DEFAULT = 8 * MEBIBYTE  # one fetch; the server caps it (fetch_bytes_max, 16 MiB)
BATCH_BYTES_DEFAULT = 1 * MEBIBYTE  # one produced record batch, before compression
BATCH_BYTES_MAX = BATCH_BYTES_MAX_DEFAULT  # the broker's default batch_bytes_max
# zstd level of the batches a write produces. Level 1, not the producer's 3: on text-like
# values (the bench's hex: 1 GB/s against 170 MB/s on one core here) it compresses some
# five times faster, and as small, and compression is a write task's largest cost.
COMPRESSION_LEVEL_DEFAULT = 1
COMPRESSION_LEVEL_MAX = 22  # zstd's
TRANSACTION_TIMEOUT_MS_DEFAULT = 15 * 60_000  # the broker's transaction_timeout_ms_max
REQUEST_TIMEOUT_MS_DEFAULT = 120_000  # one request; a commit that applies a big job takes long
# What a starting timestamp past every record means: fail, or start at the end.
TIMESTAMP_STRATEGIES = ("error", "latest")

CONNECTION_OPTIONS = ("servers", "path", "token", "tls", "tlsCaFile", "requestTimeoutMs")
READ_OPTIONS = (
    *CONNECTION_OPTIONS,
    "subscribe",
    "assign",
    "subscribePattern",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "minPartitions",
    "maxOffsetsPerTrigger",
    "includeHeaders",
    "fetchMaxBytes",
)
WRITE_OPTIONS = (
    *CONNECTION_OPTIONS,
    "topic",
    "transactionTimeoutMs",
    "batchBytes",
    "compression",
    "compressionLevel",
    "sinkId",
    "checkpointLocation",
)
# The rule of each option whose value is a number, a flag or a word (words in any case).
OPTION_RULES: dict[str, Rule] = {
    "tls": CONNECTION_RULES.rules["tls"],
    "requestTimeoutMs": CONNECTION_RULES.rules["request_timeout_ms"],
    "startingTimestamp": NON_NEGATIVE,
    "endingTimestamp": NON_NEGATIVE,
    "startingOffsetsByTimestampStrategy": OneOf(TIMESTAMP_STRATEGIES),
    "failOnDataLoss": Flag(),
    "minPartitions": POSITIVE,
    "maxOffsetsPerTrigger": POSITIVE,
    "includeHeaders": Flag(),
    "fetchMaxBytes": Integer(1024),
    "transactionTimeoutMs": Integer(1000),
    "batchBytes": Integer(1024, BATCH_BYTES_MAX),  # the broker refuses a larger batch
    "compression": OneOf(tuple(CODEC_BY_NAME)),
    "compressionLevel": Integer(1, COMPRESSION_LEVEL_MAX),
}
# Options users bring along to the wrong place (Kafka's spellings, or a write option on a
# read), and what to set instead.
MISPLACED_OPTIONS = {
    "kafka.bootstrap.servers": "is Kafka's name; twinlog calls it servers",
    "topic": (
        "is the write option (the topic a write goes to); a read names the topics it reads "
        "with subscribe (e.g. orders,payments), assign or subscribePattern"
    ),
}


class Options:
    """Case-insensitive, typed access to the raw option strings (typed: by ``OPTION_RULES``).

    Thread rule: immutable after construction; picklable (it travels to executors).
    """

    def __init__(self, raw: Mapping[str, str], known: tuple[str, ...]) -> None:
        self._values = {str(key).lower(): str(value) for key, value in raw.items()}
        self._spelling = {name.lower(): name for name in known}
        unknown = sorted(key for key in self._values if key not in self._spelling)
        if unknown:
            hint = MISPLACED_OPTIONS.get(unknown[0])
            raise OptionError(
                unknown[0],
                (f"{hint}. " if hint else "unknown option; ")
                + f"the options of format('twinlog') here are: {', '.join(known)}",
            )

    def has(self, name: str) -> bool:
        return name.lower() in self._values

    def text(self, name: str, default: str | None = None) -> str | None:
        return self._values.get(name.lower(), default)

    def required(self, name: str, hint: str) -> str:
        value = self.text(name)
        if value is None or not value.strip():
            raise OptionError(name, f"is required: {hint}")
        return value.strip()

    def boolean(self, name: str, default: bool) -> bool:
        value = self._typed(name)
        assert value is None or isinstance(value, bool)
        return default if value is None else value

    def integer(self, name: str, default: int | None) -> int | None:
        value = self._typed(name)
        assert value is None or isinstance(value, int)
        return default if value is None else value

    def choice(self, name: str, default: str) -> str:
        value = self._typed(name)
        assert value is None or isinstance(value, str)
        return default if value is None else value

    def _typed(self, name: str) -> object:
        text = self.text(name)
        return None if text is None else option_value(name, text)

    def present(self, *names: str) -> list[str]:
        """The documented spelling of each of ``names`` that was given."""
        return [name for name in names if self.has(name)]


def option_value(name: str, text: str) -> object:
    """``text``, the value of option ``name``, as its rule in ``OPTION_RULES`` reads it;
    OptionError when the rule refuses it."""
    rule = OPTION_RULES[name]
    text = text.strip()
    if isinstance(rule, OneOf):
        text = text.lower()  # words in any case, as Spark's Kafka source reads them
    value = rule.from_text(text)
    if not rule.accepts(value):
        raise OptionError(name, f"is {rule.shown(value)}, expected {rule.allowed(value)}")
    return value


@dataclass(frozen=True)
class Connection:
    """Where the data is: a broker (``servers``) or a data directory (``path``), never both."""

    servers: str | None
    path: str | None
    connection_options: ConnectionOptions

    @property
    def server(self) -> str:
        """The first address, for messages; ``servers`` as a whole (a cluster's bootstrap
        list when it names several) is what ``broker.connect`` dials."""
        assert self.servers is not None
        return self.servers.split(",")[0].strip()


def parse_connection(options: Options, *, allow_path: bool) -> Connection:
    servers = options.text("servers")
    path = options.text("path")
    if servers is not None and not servers.strip():
        raise OptionError("servers", "is empty; give the broker's address, e.g. 127.0.0.1:7070")
    if servers and path:
        raise OptionError(
            "path",
            "and servers are both set; read through a broker (servers) or straight from a "
            "data directory (path), not both",
        )
    if path and not allow_path:
        raise OptionError(
            "path",
            "is for reading a data directory without a broker; writes need a broker: set "
            "servers (e.g. 127.0.0.1:7070) instead",
        )
    if not servers and not path:
        raise OptionError(
            "servers",
            "is required: set servers to the broker's address (e.g. 127.0.0.1:7070)"
            + (", or path to a data directory to read without a broker" if allow_path else ""),
        )
    timeout_ms = options.integer("requestTimeoutMs", REQUEST_TIMEOUT_MS_DEFAULT)
    assert timeout_ms is not None
    connection_options = ConnectionOptions(
        token=options.text("token"),
        tls=options.boolean("tls", False),
        tls_ca_file=options.text("tlsCaFile"),
        request_timeout_ms=timeout_ms,
    )
    return Connection(servers or None, path or None, connection_options)
