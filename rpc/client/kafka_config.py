"""Client settings under Kafka's names, translated to twinlog's, and every name checked.

``Producer``, ``Consumer`` and ``Admin`` take Kafka's setting names where they mean the
same thing, as keywords in kafka-python's style or dotted in a ``config`` mapping:

    Producer(bootstrap_servers="127.0.0.1:7070", acks="all", batch_size=65536)
    Consumer(config={"bootstrap.servers": "127.0.0.1:7070", "group.id": "billing"})

``KAFKA_NAMES`` is the one table (docs/client-config.md shows it): each Kafka name
becomes zero or more twinlog settings, or is refused with a sentence saying why and what
to use instead (``acks=1``: twinlog always waits for the durable write). A name that is
neither twinlog's nor Kafka's is an InvalidConfigError naming the nearest known names,
never a TypeError; the same setting given twice (``batch_size`` and ``batch_bytes``, a
keyword and a ``config`` key) is an InvalidConfigError too.

``accepts_kafka_names`` wraps a client's ``__init__``: the client's own parameters (read
from its signature, so a parameter added later is known at once) always mean what they
say; only names the signature does not have are translated.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from twinlog.engine.base.config_rules import Flag
from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.base.renamed_keys import canonical_key
from twinlog.rpc.client.connection_options import ConnectionOptions
from twinlog.rpc.client.producer_config import COMPRESSIONS
from twinlog.rpc.client.retry import RetryPolicy
from twinlog.rpc.client.timeouts import DELIVERY_TIMEOUT_MS_DEFAULT

log = logging.getLogger("twinlog.client")

PRODUCER, CONSUMER, ADMIN = "Producer", "Consumer", "Admin"
ALL_CLIENTS = frozenset({PRODUCER, CONSUMER, ADMIN})
CONFIG_PARAMETER = "config"  # the mapping of dotted (or underscore) names
# Translations whose result is not a parameter of the client: the wrapper handles them.
RETRY_BACKOFF_MS, RETRY_BACKOFF_MAX_MS, CLIENT_ID = (
    "retry_backoff_ms",
    "retry_backoff_max_ms",
    "client_id",
)
CONNECTION_FIELDS = frozenset(field.name for field in dataclasses.fields(ConnectionOptions))
# The connection's settings' defaults: a config's text value converts by their type too.
CONNECTION_DEFAULTS = {
    field.name: field.default
    for field in dataclasses.fields(ConnectionOptions)
    if field.default is not dataclasses.MISSING
}
# Settings named with these units are integers whatever their default (None: derived).
INTEGER_UNITS = ("_ms", "_bytes", "_records")
Settings = dict[str, Any]


@dataclass(frozen=True)
class KafkaName:
    """One Kafka setting: for which clients, and what it becomes (``translate`` raises
    InvalidConfigError to refuse a value; an empty result: accepted, nothing to set)."""

    kafka: str
    clients: frozenset[str]
    translate: Callable[[Any], Settings]
    twinlog: str  # what it becomes, for docs/client-config.md


def _as_int(name: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)  # dotted configs copied from Kafka often hold strings
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfigError(f"{name} must be an integer, not {value!r}")
    return value


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise InvalidConfigError(f"{name} must be true or false, not {value!r}")
    return value


def _renamed(twinlog_name: str) -> Callable[[str], Callable[[Any], Settings]]:
    """A Kafka integer setting that is a twinlog one under another name."""

    def build(kafka: str) -> Callable[[Any], Settings]:
        return lambda value: {twinlog_name: _as_int(kafka, value)}

    return build


def _bootstrap_servers(value: Any) -> Settings:
    if not isinstance(value, str | list | tuple):
        return {"target": value}  # an embedded twinlog.Broker
    addresses = value.split(",") if isinstance(value, str) else list(value)
    addresses = [str(address).strip() for address in addresses if str(address).strip()]
    if not addresses:
        raise InvalidConfigError("bootstrap_servers is empty; give 'host:port'")
    # Several addresses are a bootstrap list, as Kafka's bootstrap.servers is: the client
    # asks the first that answers for the cluster's metadata (a single node answers too).
    return {"target": ",".join(addresses)}


def _acks(value: Any) -> Settings:
    if str(value).lower() in ("all", "-1"):
        return {}
    raise InvalidConfigError(
        f"acks={value!r} is not supported: twinlog answers a produce only after the write is durable, "
        "as Kafka does with acks='all'; pass acks='all' or leave it out"
    )


def _compression_type(value: Any) -> Settings:
    name = "none" if value is None else str(value).lower()
    if name in COMPRESSIONS:
        return {"compression": name}
    raise InvalidConfigError(
        f"compression_type={value!r} is not supported: pass one of "
        f"{', '.join(repr(choice) for choice in COMPRESSIONS)}, as Kafka's compression.type"
    )


def _enable_idempotence(value: Any) -> Settings:
    if not _as_bool("enable_idempotence", value):
        # Asking for less than we give is harmless: say so once, and go on idempotent.
        log.warning(
            "enable_idempotence=False: twinlog producers are always idempotent (a retried "
            "batch is never written twice); the setting is ignored"
        )
    return {}


def _retries(value: Any) -> Settings:
    if _as_int("retries", value) > 0:
        return {}
    raise InvalidConfigError(
        f"retries={value!r}: twinlog retries retriable errors until delivery_timeout_ms "
        "(sends) or the retry policy's timeout_ms (other calls), as Kafka does with its "
        "default retries; to give up sooner, lower delivery_timeout_ms"
    )


def _passed_on(name: str) -> Callable[[Any], Settings]:
    """Handled by the wrapper (the retry policy, the client id), not a parameter."""

    def translate(value: Any) -> Settings:
        return {name: _as_int(name, value) if name != CLIENT_ID else str(value)}

    return translate


def _isolation_level(value: Any) -> Settings:
    if value == "read_committed":
        return {}
    if value == "read_uncommitted":
        log.info(
            "isolation_level='read_uncommitted': twinlog data logs hold committed records "
            "only, so every read is read_committed"
        )
        return {}
    raise InvalidConfigError(
        f"isolation_level={value!r} is not 'read_committed' or 'read_uncommitted'"
    )


def _ignored(reason: str) -> Callable[[str], Callable[[Any], Settings]]:
    """Accepted and left out, with one info line saying why (a Kafka setting whose job
    twinlog's server does)."""

    def build(kafka: str) -> Callable[[Any], Settings]:
        def translate(value: Any) -> Settings:
            log.info("%s=%r is not needed: %s", kafka, value, reason)
            return {}

        return translate

    return build


def _security_protocol(value: Any) -> Settings:
    protocol = str(value).upper()
    if protocol == "PLAINTEXT":
        return {}
    if protocol == "SSL":
        return {"tls": True}
    if protocol.startswith("SASL"):
        raise _sasl_refused("security_protocol")
    raise InvalidConfigError(f"security_protocol={value!r} is not PLAINTEXT or SSL")


def _sasl_refused(name: str) -> InvalidConfigError:
    return InvalidConfigError(
        f"{name}: twinlog has no SASL; it authenticates with a bearer token: pass token= "
        "(or set TWINLOG_TOKEN), over TLS (ssl_cafile=, or tls_ca_file=)"
    )


def _refused(reason: str) -> Callable[[str], Callable[[Any], Settings]]:
    def build(kafka: str) -> Callable[[Any], Settings]:
        def translate(value: Any) -> Settings:
            raise InvalidConfigError(f"{kafka}: {reason}")

        return translate

    return build


def _sasl(kafka: str) -> Callable[[Any], Settings]:
    def translate(value: Any) -> Settings:
        raise _sasl_refused(kafka)

    return translate


def _tls_file(twinlog_name: str) -> Callable[[str], Callable[[Any], Settings]]:
    return lambda kafka: lambda value: {twinlog_name: str(value)}


def _fixed(translate: Callable[[Any], Settings]) -> Callable[[str], Callable[[Any], Settings]]:
    return lambda kafka: translate


_P, _C, _A = frozenset({PRODUCER}), frozenset({CONSUMER}), ALL_CLIENTS
_SERIALIZED = "twinlog sends and returns bytes: serialize before send(), deserialize after poll()"
_SERVER_ASSIGNS = (
    "the group's coordinator assigns partitions (uniform and sticky, moved incrementally: "
    "KIP-848's server-side assignment) and sets the heartbeat interval"
)

# (Kafka name, clients, translation builder, what it becomes in twinlog)
_TABLE: list[tuple[str, frozenset[str], Callable[[str], Callable[[Any], Settings]], str]] = [
    ("bootstrap_servers", _A, _fixed(_bootstrap_servers), "target (a bootstrap list if several)"),
    ("client_id", _A, _passed_on, ".client_id"),
    ("security_protocol", _A, _fixed(_security_protocol), "tls (PLAINTEXT or SSL)"),
    ("ssl_cafile", _A, _tls_file("tls_ca_file"), "tls_ca_file"),
    ("ssl_certfile", _A, _tls_file("tls_cert_file"), "tls_cert_file"),
    ("ssl_keyfile", _A, _tls_file("tls_key_file"), "tls_key_file"),
    ("sasl_mechanism", _A, _sasl, "refused: token="),
    ("sasl_plain_username", _A, _sasl, "refused: token="),
    ("sasl_plain_password", _A, _sasl, "refused: token="),
    ("sasl_oauth_token_provider", _A, _sasl, "refused: token="),
    ("retry_backoff_ms", _A, _passed_on, "retry=RetryPolicy(backoff_ms=...)"),
    ("retry_backoff_max_ms", _A, _passed_on, "retry=RetryPolicy(backoff_max_ms=...)"),
    ("acks", _P, _fixed(_acks), "(always 'all')"),
    ("batch_size", _P, _renamed("batch_bytes"), "batch_bytes"),
    ("buffer_memory", _P, _renamed("buffer_bytes_max"), "buffer_bytes_max"),
    ("max_request_size", _P, _renamed("batch_bytes_max"), "batch_bytes_max"),
    ("compression_type", _P, _fixed(_compression_type), "compression (Kafka's codecs, 'none')"),
    ("enable_idempotence", _P, _fixed(_enable_idempotence), "(always idempotent)"),
    ("retries", _P, _fixed(_retries), "(retries until delivery_timeout_ms)"),
    ("key_serializer", _P, _refused(_SERIALIZED), "refused: send bytes"),
    ("value_serializer", _P, _refused(_SERIALIZED), "refused: send bytes"),
    ("isolation_level", _C, _fixed(_isolation_level), "(always read_committed)"),
    ("key_deserializer", _C, _refused(_SERIALIZED), "refused: poll() gives bytes"),
    ("value_deserializer", _C, _refused(_SERIALIZED), "refused: poll() gives bytes"),
    ("heartbeat_interval_ms", _C, _ignored(_SERVER_ASSIGNS), "(set by the coordinator)"),
    ("partition_assignment_strategy", _C, _ignored(_SERVER_ASSIGNS), "(the coordinator's)"),
    ("group_protocol", _C, _ignored(_SERVER_ASSIGNS), "(always KIP-848's)"),
]
KAFKA_NAMES: dict[str, KafkaName] = {
    kafka: KafkaName(kafka, clients, build(kafka), twinlog)
    for kafka, clients, build, twinlog in _TABLE
}
# Kafka's names that are twinlog's own parameter names already (the same meaning).
SAME_NAMES: dict[str, frozenset[str]] = {
    "transactional_id": _P,
    "transaction_timeout_ms": _P,
    "delivery_timeout_ms": _P,
    "linger_ms": _P,
    "max_block_ms": _P,
    "request_timeout_ms": _A,
    "group_id": _C,
    "auto_offset_reset": _C,
    "fetch_max_bytes": _C,
    "fetch_max_wait_ms": _C,
    "max_poll_records": _C,
    "enable_auto_commit": _C,
    "auto_commit_interval_ms": _C,
    "group_instance_id": _C,
    "session_timeout_ms": _C,
    "max_poll_interval_ms": _C,
    "metadata_max_age_ms": _C,
    "consumer_timeout_ms": _C,
}


@dataclass(frozen=True)
class ClientParameters:
    """What a client's ``__init__`` takes, read from its signature."""

    client: str
    names: frozenset[str]  # its own parameters, and ConnectionOptions' fields if **options
    positional: tuple[str, ...]
    required: frozenset[str]
    defaults: Mapping[str, Any]

    @classmethod
    def of(cls, client: str, init: Callable[..., None]) -> ClientParameters:
        parameters = list(inspect.signature(init).parameters.values())[1:]  # without self
        names = {p.name for p in parameters if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        if any(p.kind is p.VAR_KEYWORD for p in parameters):
            names |= CONNECTION_FIELDS
        return cls(
            client,
            frozenset(names),
            tuple(
                p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ),
            frozenset(
                p.name
                for p in parameters
                if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
            ),
            {p.name: p.default for p in parameters if p.default is not p.empty},
        )

    def is_own(self, name: str) -> bool:
        return name in self.names or canonical_key(name) in self.names

    def own_name(self, name: str) -> str:
        """The client's current name for ``name`` when it is an older one of its own; else
        ``name`` (so its value converts and is passed on under the name __init__ takes)."""
        current = canonical_key(name)
        return current if current != name and current in self.names else name


def translate_settings(
    parameters: ClientParameters,
    positional_count: int,
    keywords: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
) -> Settings:
    """The keyword arguments for the client's ``__init__``: its own names as given, Kafka's
    translated. Raises InvalidConfigError for an unknown name, a refused value, or one
    setting given twice."""
    given: list[tuple[str, Any, str]] = [  # (name, value, where it was given)
        (parameters.own_name(name), value, "a keyword") for name, value in keywords.items()
    ]
    for key, value in (config or {}).items():
        name = parameters.own_name(str(key).replace(".", "_"))
        given.append((name, _from_text(parameters, name, value), f"config[{key!r}]"))
    settings: Settings = {}
    sources: dict[str, str] = {
        name: "the positional argument" for name in parameters.positional[:positional_count]
    }
    from_kafka: set[str] = set()  # settings that came from one of Kafka's names
    for name, value, where in given:
        translated = _translate_one(parameters, name, value)
        # A name whose translation sets nothing (acks='all') is still given only once.
        for key in translated or {name: None}:
            target = canonical_key(key)
            if target in sources:
                raise InvalidConfigError(
                    f"{parameters.client}(): {target} is given twice ({sources[target]} and "
                    f"{name} as {where}); give it once"
                )
            sources[target] = f"{name} as {where}"
        settings.update(translated)
        if not parameters.is_own(name):
            from_kafka.update(translated)
    missing = sorted(parameters.required - set(sources))
    if missing:
        raise InvalidConfigError(
            f"{parameters.client}() needs {', '.join(missing)}"
            + (
                ": a server address ('127.0.0.1:7070', or bootstrap_servers=) or a twinlog.Broker"
                if "target" in missing
                else ""
            )
        )
    _build_retry_policy(parameters, settings)
    loose = sorted(key for key in from_kafka if key in CONNECTION_FIELDS)
    if loose and settings.get("connection") is not None:
        raise InvalidConfigError(
            f"{parameters.client}(): connection= is given with Kafka's connection settings "
            f"(they set {', '.join(loose)}); put them in the ConnectionOptions, or pass no "
            "connection="
        )
    return settings


def _translate_one(parameters: ClientParameters, name: str, value: Any) -> Settings:
    if parameters.is_own(name):
        return {name: value}
    known = KAFKA_NAMES.get(name)
    if known is not None and parameters.client in known.clients:
        return known.translate(value)
    raise _unknown(parameters, name, known)


def _unknown(
    parameters: ClientParameters, name: str, known: KafkaName | None
) -> InvalidConfigError:
    other_clients = known.clients if known else SAME_NAMES.get(name, frozenset())
    if other_clients:
        return InvalidConfigError(
            f"{parameters.client}() does not take {name}: it is a setting of "
            f"{' and '.join(sorted(other_clients))}"
        )
    candidates = sorted(
        parameters.names
        | {kafka for kafka, entry in KAFKA_NAMES.items() if parameters.client in entry.clients}
    )
    nearest = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(nearest)}?" if nearest else ""
    return InvalidConfigError(
        f"{parameters.client}() has no setting {name!r}{hint} "
        "(docs/client-config.md lists twinlog's settings and the Kafka names it accepts)"
    )


def _from_text(parameters: ClientParameters, name: str, value: Any) -> Any:
    """A ``config`` value of one of the client's own integer or true/false settings (its
    connection's too, and any named in ms, bytes or records, such as delivery_timeout_ms,
    whose default is derived) may be text, as Kafka configs copied from properties files
    are ("false" is not bool("false")); text that is neither is left as it is, for the
    setting's rule to refuse."""
    default = parameters.defaults.get(name, CONNECTION_DEFAULTS.get(name))
    if isinstance(value, str) and isinstance(default, bool):
        return Flag().from_text(value)
    if isinstance(value, str) and (isinstance(default, int) or name.endswith(INTEGER_UNITS)):
        return _as_int(name, value)
    return value


def _build_retry_policy(parameters: ClientParameters, settings: Settings) -> None:
    backoff = {
        field: settings.pop(kafka)
        for kafka, field in (
            (RETRY_BACKOFF_MS, "backoff_ms"),
            (RETRY_BACKOFF_MAX_MS, "backoff_max_ms"),
        )
        if kafka in settings and kafka not in parameters.names
    }
    if not backoff:
        return
    if "retry" in settings:
        raise InvalidConfigError(
            f"{parameters.client}(): retry= is given with {', '.join(sorted(backoff))}; put "
            "the backoff in the RetryPolicy, or pass no retry="
        )
    # A producer's policy lasts as long as its deliveries, as it does without a backoff.
    # (None: the producer's default delivery timeout, resolved from linger and request)
    timeout_ms = settings.get("delivery_timeout_ms") or parameters.defaults.get(
        "delivery_timeout_ms"
    )
    if timeout_ms is None:
        timeout_ms = (
            DELIVERY_TIMEOUT_MS_DEFAULT
            if "delivery_timeout_ms" in parameters.names
            else RetryPolicy.timeout_ms
        )
    settings["retry"] = RetryPolicy(timeout_ms=timeout_ms, **backoff)


P = ParamSpec("P")
C = TypeVar("C")


def accepts_kafka_names(
    client: str,
) -> Callable[[Callable[Concatenate[C, P], None]], Callable[Concatenate[C, P], None]]:
    """Decorate a client's ``__init__``: Kafka's names and ``config=`` are translated and
    every name is checked before the ``__init__`` runs."""

    def decorate(init: Callable[Concatenate[C, P], None]) -> Callable[Concatenate[C, P], None]:
        parameters = ClientParameters.of(client, init)

        @functools.wraps(init)
        def wrapper(self: C, *args: P.args, **kwargs: P.kwargs) -> None:
            config = None if CONFIG_PARAMETER in parameters.names else kwargs.pop("config", None)
            if config is not None and not isinstance(config, Mapping):
                raise InvalidConfigError(
                    f"config must be a mapping of names to values, not {config!r}"
                )
            settings = translate_settings(parameters, len(args), kwargs, config)
            client_id = None if CLIENT_ID in parameters.names else settings.pop(CLIENT_ID, None)
            init(self, *args, **settings)
            if client_id is not None:
                self.client_id = client_id  # type: ignore[attr-defined]

        return wrapper

    return decorate


def documented_names() -> Iterable[tuple[str, str, str]]:
    """(Kafka name, clients, twinlog name) of every accepted or refused Kafka name."""
    for entry in KAFKA_NAMES.values():
        yield entry.kafka, ", ".join(sorted(entry.clients)), entry.twinlog
    for name, clients in SAME_NAMES.items():
        yield name, ", ".join(sorted(clients)), name
