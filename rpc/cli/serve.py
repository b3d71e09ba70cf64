"""``twinlog serve``: run a broker behind the gRPC server."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twinlog.engine.base.addresses import check_port, parse_host_port
from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.broker.broker import Broker
from twinlog.engine.broker.config import BrokerConfig
from twinlog.rpc.cli import serve_console
from twinlog.rpc.cli.common import add_command
from twinlog.rpc.kafka.settings import KafkaListenerSettings
from twinlog.rpc.server.config import (
    ServerConfig,
    check_a_batch_fits_a_request,
    parse_pairs,
    read_config_file,
    server_config_from,
    split_config,
)
from twinlog.rpc.server.log_format import LOG_FORMATS, LOG_LEVELS, configure_server_logging
from twinlog.rpc.wire.broker_api import BrokerApi

if TYPE_CHECKING:
    from twinlog.rpc.kafka.listener import KafkaListener
    from twinlog.rpc.server.metrics import ServerMetrics
    from twinlog.rpc.server.server import FrontEnd, ServedCluster

log = logging.getLogger("twinlog.server")

EXAMPLE = """
twinlog serve --data-dir /var/lib/twinlog
twinlog serve --data-dir ./data --port 7071 --config transaction_timeout_ms_default=30000
twinlog serve --data-dir ./data --config auto.create.topics.enable=false   # topics on purpose only
twinlog serve --data-dir ./data --metrics-port 9464 --log-format json
twinlog serve --data-dir ./data --host 0.0.0.0 --tokens-file tokens.txt \\
    --acl-file acl.txt --tls-cert server.pem --tls-key server.key
twinlog serve --data-dir ./b1 --port 7071 --broker-id 1 --zookeeper 127.0.0.1:2181/twinlog/dev
twinlog serve --data-dir ./data --kafka-listener 127.0.0.1:9092   # Kafka clients too
twinlog serve --data-dir ./data --console-port 8080             # and the web console
twinlog serve --data-dir ./data --host 0.0.0.0 --tokens-file tokens.txt \\
    --tls-cert server.pem --tls-key server.key --kafka-listener kafka.example.com:9093   # SASL_SSL
twinlog serve --data-dir ./b1 --port 7071 --broker-id 1 --zookeeper 127.0.0.1:2181/twinlog/dev \\
    --kafka-listener 127.0.0.1:9093   # every broker of a cluster may have one
"""


def log_level(text: str) -> str:
    """Any case of a known level; anything else unchanged, so argparse's refusal quotes it."""
    return text.upper() if text.upper() in LOG_LEVELS else text


def register(subparsers: Any) -> None:
    parser = add_command(subparsers, "serve", "run a broker and serve it over gRPC", EXAMPLE, [])
    parser.add_argument("--data-dir", required=True, help="broker data directory (created)")
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default 7070; 0 picks a free one)")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a server or broker setting (repeatable); see rpc/server/config.py and "
        "engine/broker/config.py for the keys (batch_bytes_max, the largest batch a topic "
        "takes unless its max.message.bytes says otherwise, is the broker's). Topics are "
        "created on a producer's first send, as Kafka's: auto.create.topics.enable "
        f"(default {str(BrokerConfig.auto_create_topics_enable).lower()}; the producer's "
        f"principal needs CREATE), with num.partitions (default {BrokerConfig.num_partitions}) "
        "and default.replication.factor (default "
        f"{BrokerConfig.default_replication_factor} on a cluster, 1 on a single node)",
    )
    parser.add_argument("--config-file", help="file of KEY=VALUE lines (# comments)")
    parser.add_argument(
        "--kafka-listener",
        metavar="HOST:PORT",
        help="also speak Kafka's wire protocol here, for unmodified Kafka clients "
        "(kafka-python, librdkafka, ...), on the same broker; TLS with the "
        "--tls-cert/--tls-key certificate when given (clients: security.protocol SSL, or "
        "SASL_SSL with --tokens-file; --tls-client-ca: client certificates, whose CN is the "
        "principal without --tokens-file), else plaintext; with --tokens-file clients "
        "authenticate with SASL/PLAIN (user = principal, password = token) and --acl-file "
        "applies. On a cluster broker (--zookeeper) the address is registered with the "
        "broker, so Kafka clients bootstrapped at any broker's listener find every "
        "partition's leader and every coordinator: HOST must then be one clients reach "
        "(a listener on 0.0.0.0 registers --advertised-host) (docs/kafka-protocol.md)",
    )
    parser.add_argument(
        "--kafka-connections-per-address-max",
        type=int,
        default=KafkaListenerSettings.connections_per_address_max,
        metavar="N",
        help="Kafka connections open at once from one IP address; more are logged and "
        "closed, so one address cannot take every slot (default %(default)s; raise it for "
        "clients behind one NAT or proxy)",
    )
    security = parser.add_argument_group("security")
    security.add_argument("--tls-cert", help="PEM certificate of the server")
    security.add_argument("--tls-key", help="PEM private key of the server")
    security.add_argument("--tls-client-ca", help="PEM CA for client certificates (mutual TLS)")
    security.add_argument("--tokens-file", help="'TOKEN PRINCIPAL' lines: require bearer tokens")
    security.add_argument(
        "--acl-file",
        help="'PRINCIPAL OPERATION PATTERN' lines; PATTERN globs topic names (internal ones, "
        "__*, only when it starts __), transactional ids written transactional-id:GLOB, or "
        "consumer groups written group:GLOB (see rpc/policy/auth.py)",
    )
    security.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback --host without authentication (logs a warning)",
    )
    cluster = parser.add_argument_group("cluster (docs/replication.md, docs/zookeeper.md)")
    cluster.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[,...][/CHROOT]",
        help="join the cluster whose metadata is in this ZooKeeper (needs --broker-id); "
        "without it the broker is a single node, with no ZooKeeper",
    )
    cluster.add_argument(
        "--broker-id", type=int, help="this broker's id in the cluster (0 or more)"
    )
    cluster.add_argument(
        "--zookeeper-auth-file",
        metavar="FILE",
        help="ZooKeeper credentials file ('digest USER:PASSWORD', mode 600): the broker "
        "authenticates with it and creates every znode readable and writable by it alone "
        "(docs/zookeeper.md, 'Locking ZooKeeper down')",
    )
    cluster.add_argument(
        "--advertised-host",
        help="the host other brokers and clients reach this one at (default: --host)",
    )
    cluster.add_argument(
        "--advertised-port",
        type=int,
        help="the port other brokers and clients reach this one at, when something in "
        "between (a proxy, a NAT) forwards another to the one it listens on (default: the "
        "listening port)",
    )
    cluster.add_argument(
        "--inter-broker-host",
        help="the host other brokers reach this one at, when not the advertised one (Kafka's "
        "inter-broker listener; default: the advertised host)",
    )
    cluster.add_argument(
        "--inter-broker-port",
        type=int,
        help="the port other brokers reach this one at, when not the advertised one "
        "(default: the inter-broker listener's, else the advertised port)",
    )
    cluster.add_argument(
        "--inter-broker-listener",
        metavar="HOST:PORT",
        help="serve replication and coordination to other brokers only, on this address "
        "(mutual TLS with the --inter-broker-tls-* files; default with them: --host and a "
        "free port, registered in ZooKeeper)",
    )
    cluster.add_argument(
        "--inter-broker-tls-cert",
        metavar="PEM",
        help="this broker's certificate (CN=twinlog-broker-ID, signed by the cluster CA); "
        "required on a cluster whose clients need tokens, ACLs or certificates "
        "('twinlog cluster certs' makes a development set)",
    )
    cluster.add_argument("--inter-broker-tls-key", metavar="PEM", help="its private key")
    cluster.add_argument(
        "--inter-broker-tls-ca",
        metavar="PEM",
        help="the cluster CA: only brokers with a certificate it signed are served",
    )
    cluster.add_argument(
        "--zookeeper-session-timeout-ms",
        type=int,
        default=6000,
        help="after this long unreachable the broker's session expires: it exits, and the "
        "cluster moves its leaderships (default 6000)",
    )
    observability = parser.add_argument_group("observability (docs/operations.md)")
    observability.add_argument(
        "--metrics-port",
        type=int,
        help="serve Prometheus metrics on http://METRICS-HOST:PORT/metrics (0 picks a free "
        "port and logs it; default: no endpoint)",
    )
    observability.add_argument(
        "--metrics-host",
        help="address the metrics endpoint listens on, whatever --host is (default "
        "127.0.0.1); a non-loopback one without --metrics-token-file logs a warning",
    )
    observability.add_argument(
        "--metrics-token-file",
        metavar="FILE",
        help="a file holding one token (16 characters or more) that scrapes must send as "
        "'Authorization: Bearer TOKEN' (Prometheus: authorization: credentials_file:); "
        "others get 401 and an audit line",
    )
    observability.add_argument(
        "--metrics-tls-cert", metavar="FILE", help="PEM certificate: serve metrics over HTTPS"
    )
    observability.add_argument(
        "--metrics-tls-key", metavar="FILE", help="PEM private key of --metrics-tls-cert"
    )
    observability.add_argument(
        "--no-reflection",
        action="store_true",
        help="serve no gRPC reflection (by default grpcurl and other tools can list and "
        "call the client port's services without the .proto files, authenticated as any "
        "call; server config key reflection)",
    )
    observability.add_argument(
        "--log-level",
        default="INFO",
        type=log_level,
        choices=LOG_LEVELS,
        help="DEBUG (with one line per request), INFO, WARNING or ERROR, any case (default INFO)",
    )
    observability.add_argument(
        "--log-format",
        default="text",
        choices=LOG_FORMATS,
        help="text lines, or one JSON object per line (default text)",
    )
    parser.add_argument(
        "--cpu-affinity",
        metavar="one|all|LIST",
        help="the CPUs the server's threads run on: one (the default: one of those it may "
        "use, a cluster broker's by its broker id; its threads hand the interpreter lock to "
        "each other hundreds of times a transaction, cheaply on one core), all, or a list "
        "such as 0,2-3; give it more than one when its network, TLS and compression need "
        'more than a core (server config key cpu_affinity; docs/operations.md, "CPU")',
    )
    serve_console.add_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from twinlog.rpc.server.inter_broker import InterBrokerFlags
    from twinlog.rpc.server.server import ClusterFlags, serve

    configure_server_logging(args.log_level, args.log_format)
    values: dict[str, Any] = {}
    if args.config_file:
        values.update(read_config_file(args.config_file))
    values.update(parse_pairs(args.config, "--config"))
    server_values, broker_values = split_config(values)
    flags = {
        "host": args.host,
        "port": args.port,
        "tls_cert_file": args.tls_cert,
        "tls_key_file": args.tls_key,
        "tls_client_ca_file": args.tls_client_ca,
        "tokens_file": args.tokens_file,
        "acl_file": args.acl_file,
        "insecure": args.insecure or None,
        "metrics_port": args.metrics_port,
        "metrics_host": args.metrics_host,
        "metrics_token_file": args.metrics_token_file,
        "metrics_tls_cert_file": args.metrics_tls_cert,
        "metrics_tls_key_file": args.metrics_tls_key,
        "reflection": False if args.no_reflection else None,
        "cpu_affinity": args.cpu_affinity,
    }
    server_values.update({key: value for key, value in flags.items() if value is not None})
    cluster = None
    if args.zookeeper or args.broker_id is not None:
        if not args.zookeeper or args.broker_id is None or args.broker_id < 0:
            raise SystemExit(
                "twinlog serve: --zookeeper and --broker-id (0 or more) go together: a cluster "
                "broker needs both"
            )
        for flag, port in (
            ("--advertised-port", args.advertised_port),
            ("--inter-broker-port", args.inter_broker_port),
        ):
            if port is None:
                continue
            try:
                check_port(port, flag)  # registered for others to connect to: never 0
            except InvalidConfigError as error:
                raise SystemExit(f"twinlog serve: {error}") from None
        cluster = ClusterFlags(
            args.broker_id,
            args.zookeeper,
            args.advertised_host,
            args.zookeeper_session_timeout_ms,
            args.advertised_port,
            args.inter_broker_host,
            args.inter_broker_port,
            InterBrokerFlags(
                args.inter_broker_listener,
                args.inter_broker_tls_cert,
                args.inter_broker_tls_key,
                args.inter_broker_tls_ca,
            ),
            args.zookeeper_auth_file,
        )
    elif args.inter_broker_listener or args.inter_broker_tls_cert or args.zookeeper_auth_file:
        raise SystemExit(
            "twinlog serve: --inter-broker-* and --zookeeper-auth-file are for a cluster "
            "broker (with --zookeeper and --broker-id)"
        )
    config = server_config_from(server_values)
    check_a_batch_fits_a_request(config, broker_values)
    open_kafka = None
    if args.kafka_listener:
        open_kafka = kafka_listener_opener(
            args.kafka_listener,
            config,
            args.advertised_host,
            connections_per_address_max=args.kafka_connections_per_address_max,
        )
    open_beside = serve_console.with_console(args, config, open_kafka)
    return serve(args.data_dir, config, broker_values, cluster, open_beside)


WILDCARD_HOSTS = ("0.0.0.0", "::", "")


class _KafkaFrontEnd:
    """The Kafka listener beside the gRPC server: bound, serving from ``start()``."""

    def __init__(self, listener: KafkaListener, grace_ms: int, security: str) -> None:
        self.listener = listener
        self.grace_ms = grace_ms
        self.security = security

    @property
    def kafka_address(self) -> tuple[str, int]:
        return self.listener.advertised_host, self.listener.port

    def start(self) -> None:
        self.listener.start()
        log.info("serving Kafka clients on %s (%s)", self.listener.address, self.security)

    def stop(self) -> None:
        self.listener.stop(self.grace_ms)
        if self.listener.context.cluster is not None:
            self.listener.context.cluster.close()


def kafka_listener_opener(
    address: str,
    config: ServerConfig,
    advertised_host: str | None = None,
    connections_per_address_max: int = KafkaListenerSettings.connections_per_address_max,
) -> Callable[[BrokerApi, ServedCluster | None, ServerMetrics], FrontEnd]:
    """What opens the Kafka listener on the served broker (checked now, before the broker
    opens: a refused flag or an unusable certificate costs no recovery); on a cluster
    broker it answers for the cluster. It serves TLS when the gRPC server does, with its
    certificate. ``advertised_host``: the host a cluster broker registers for it when it
    listens on a wildcard address (0.0.0.0, ::)."""
    from twinlog.rpc.kafka.listener import KafkaListener
    from twinlog.rpc.kafka.settings import FRAME_BYTES_MARGIN
    from twinlog.rpc.kafka.tls import server_tls_context
    from twinlog.rpc.server.server import guard_of

    host, port = parse_host_port(address, "--kafka-listener", any_port=True)
    loopback = ServerConfig(host=host).is_loopback
    if not loopback and not config.authentication_configured and not config.insecure:
        raise SystemExit(
            f"twinlog serve: --kafka-listener {address}: without --tokens-file (or "
            "--tls-client-ca) Kafka clients are not authenticated, so it listens on a loopback "
            "address only, unless --insecure"
        )
    try:
        # The server's limits hold on both doors (--config request_bytes_max=..., ...).
        settings = KafkaListenerSettings(
            frame_bytes_max=config.request_bytes_max + FRAME_BYTES_MARGIN,
            fetch_bytes_max=config.fetch_bytes_max,
            fetch_wait_ms_max=config.fetch_wait_ms_max,
            connections_per_address_max=connections_per_address_max,
            group_consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
        )
    except InvalidConfigError as error:
        raise SystemExit(f"twinlog serve: {error}") from None
    tls = None
    if config.tls_cert_file and config.tls_key_file:
        tls = server_tls_context(
            config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file
        )

    def open_listener(
        broker: BrokerApi, served: ServedCluster | None, metrics: ServerMetrics
    ) -> FrontEnd:
        from twinlog.rpc.kafka.cluster import KafkaCluster

        if not loopback and config.tokens_file and tls is None:
            log.warning(
                "Kafka clients on %s send their SASL/PLAIN tokens in clear: add --tls-cert and "
                "--tls-key",
                address,
            )
        cluster = None
        if served is not None:
            cluster = KafkaCluster(served.broker_id, served.metadata_source, broker)
        # the served broker is the engine's: it answers for requests naming no transaction
        assert isinstance(broker, Broker), type(broker)
        listener = KafkaListener(
            broker,
            host,
            port,
            settings,
            advertised_host=advertised_host if host in WILDCARD_HOSTS else None,
            guard=guard_of(config, broker),
            tls=tls,
            cluster=cluster,
            metrics=metrics,
            request_log_slow_ms=config.request_log_slow_ms,
        )
        return _KafkaFrontEnd(listener, config.shutdown_grace_ms, _kafka_security(config))

    return open_listener


def _kafka_security(config: ServerConfig) -> str:
    """Kafka's name for what the listener serves (its security.protocol), for the log."""
    protocol = ("SASL_" if config.tokens_file else "") + (
        "SSL" if config.tls_cert_file else "PLAINTEXT"
    )
    if config.tls_client_ca_file:
        return f"{protocol}, client certificates required"
    return protocol
