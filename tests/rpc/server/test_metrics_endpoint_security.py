"""The metrics endpoint's exposure, over real HTTP on 127.0.0.1: where it binds (loopback
unless told otherwise, whatever the gRPC server's host), the bearer token it can require
(401 and an audit line without it), HTTPS, clients that stall, the start-up warning, and
the ``twinlog serve`` flags that set it all."""

from __future__ import annotations

import http.client
import logging
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pki_support import make_pki
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families
from rpc_fakes import FakeBroker

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.cli.main import build_parser
from twinlog.rpc.policy.audit import AUDIT_LOGGER
from twinlog.rpc.server.config import ServerConfig, server_config_from
from twinlog.rpc.server.metrics_endpoint import CONNECTIONS_MAX, MetricsEndpoint
from twinlog.rpc.server.server import RpcServer

TOKEN = "metrics-token-5e0c9a7b3d1f42"
SCRAPE_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "metrics-token"
    path.write_text(TOKEN + "\n")  # the newline an editor or echo leaves is not the token's
    return path


def registry_with_a_counter() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("probe_scrapes", "a counter the scrape must show", registry=registry).inc()
    return registry


@pytest.fixture
def started() -> Iterator[list[MetricsEndpoint]]:
    """Endpoints a test starts, stopped after it whatever happened."""
    endpoints: list[MetricsEndpoint] = []
    yield endpoints
    for endpoint in endpoints:
        endpoint.stop()


def start(started: list[MetricsEndpoint], **options: Any) -> MetricsEndpoint:
    endpoint = MetricsEndpoint(registry_with_a_counter(), "127.0.0.1", 0, **options)
    endpoint.start()
    started.append(endpoint)
    return endpoint


def scrape(
    url: str, token: str | None = None, context: ssl.SSLContext | None = None
) -> tuple[int, str]:
    """(status, body), for 4xx answers too."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=SCRAPE_TIMEOUT_S, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        with error:  # the refusal holds the connection's socket until closed
            return error.code, error.read().decode()


def metric_names(text: str) -> set[str]:
    return {family.name for family in text_string_to_metric_families(text)}


# Where it binds


def test_the_endpoint_binds_to_loopback_when_the_grpc_server_listens_everywhere() -> None:
    server = RpcServer(FakeBroker(), ServerConfig(host="0.0.0.0", port=0, metrics_port=0))
    server.start()
    try:
        endpoint = server.metrics_endpoint
        assert endpoint is not None
        assert endpoint.url.startswith("http://127.0.0.1:")
        assert endpoint.bound_address == ("127.0.0.1", endpoint.port)
        status, text = scrape(endpoint.url)
        assert status == 200 and "twinlog_under_replicated_partitions" in metric_names(text)
    finally:
        server.stop(grace_ms=0)


def test_a_metrics_host_given_is_the_one_bound() -> None:
    config = ServerConfig(port=0, metrics_port=0, metrics_host="0.0.0.0")
    server = RpcServer(FakeBroker(), config)
    server.start()
    try:
        endpoint = server.metrics_endpoint
        assert endpoint is not None and endpoint.bound_address == ("0.0.0.0", endpoint.port)
        status, _ = scrape(f"http://127.0.0.1:{endpoint.port}/metrics")
        assert status == 200
    finally:
        server.stop(grace_ms=0)


# Bearer token


def test_a_token_is_required_once_configured(
    started: list[MetricsEndpoint], token_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint = start(started, token_file=str(token_file))
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        status, body = scrape(endpoint.url)
        assert status == 401
        assert "Authorization: Bearer TOKEN" in body and "--metrics-token-file" in body
        status, body = scrape(endpoint.url, token=TOKEN[:-1] + "X")
        assert status == 401
    refusals = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert len(refusals) == 2, refusals
    assert refusals[0].startswith("metrics.refused peer=ipv4:127.0.0.1:")
    assert 'reason="no Authorization header"' in refusals[0]
    assert 'reason="the bearer token is wrong"' in refusals[1]
    assert not any(TOKEN[:-1] in message for message in caplog.messages)  # never logged

    status, text = scrape(endpoint.url, token=TOKEN)
    assert status == 200 and "probe_scrapes" in metric_names(text)


def test_another_scheme_than_bearer_is_refused(
    started: list[MetricsEndpoint], token_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint = start(started, token_file=str(token_file))
    request = urllib.request.Request(endpoint.url, headers={"Authorization": f"Basic {TOKEN}"})
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=SCRAPE_TIMEOUT_S)
    with refused.value:  # the refusal holds the connection's socket until closed
        assert refused.value.code == 401
        assert refused.value.headers["WWW-Authenticate"].startswith("Bearer")
    assert any('reason="not a bearer token"' in message for message in caplog.messages)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "cannot read metrics token file"),
        ("short-token\n", "shorter than 16 characters"),
        ("", "shorter than 16 characters"),
        (f"{TOKEN} {TOKEN}\n", "must hold one token"),
        (f"{TOKEN}\n{TOKEN}\n", "must hold one token"),
        (f"{TOKEN}é\n", "must hold one token"),
    ],
    ids=["missing", "short", "empty", "two-words", "two-lines", "non-ascii"],
)
def test_an_unusable_token_file_is_refused_naming_it(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    path = tmp_path / "metrics-token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InvalidConfigError, match=expected) as refused:
        RpcServer(FakeBroker(), ServerConfig(port=0, metrics_port=0, metrics_token_file=str(path)))
    assert str(path) in str(refused.value)
    assert TOKEN not in str(refused.value)


# TLS


def client_context(pki: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki / "ca.pem"))


def tls_options(pki: Path) -> dict[str, str]:
    return {"tls_cert_file": str(pki / "server.pem"), "tls_key_file": str(pki / "server.key")}


def test_tls_serves_https_only(started: list[MetricsEndpoint], pki: Path) -> None:
    endpoint = start(started, **tls_options(pki))
    assert endpoint.url == f"https://127.0.0.1:{endpoint.port}/metrics"
    status, text = scrape(endpoint.url, context=client_context(pki))
    assert status == 200 and "probe_scrapes" in metric_names(text)
    plain = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=SCRAPE_TIMEOUT_S)
    try:
        with pytest.raises((http.client.HTTPException, OSError)):
            plain.request("GET", "/metrics")
            plain.getresponse()
    finally:
        plain.close()
    # Another authority's client does not trust it.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        scrape(endpoint.url, context=ssl.create_default_context())


def test_tls_and_a_token_together(
    started: list[MetricsEndpoint], pki: Path, token_file: Path
) -> None:
    endpoint = start(started, token_file=str(token_file), **tls_options(pki))
    assert scrape(endpoint.url, context=client_context(pki))[0] == 401
    assert scrape(endpoint.url, token=TOKEN, context=client_context(pki))[0] == 200


def test_an_unusable_certificate_is_refused_at_construction(pki: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="metrics TLS certificate"):
        MetricsEndpoint(
            CollectorRegistry(),
            "127.0.0.1",
            0,
            tls_cert_file=str(pki / "server.pem"),
            tls_key_file=str(tmp_path / "missing.key"),
        )
    with pytest.raises(InvalidConfigError, match="--metrics-tls-cert and --metrics-tls-key"):
        ServerConfig(metrics_port=0, metrics_tls_cert_file=str(pki / "server.pem"))


# Clients that stall


def test_a_stalled_client_neither_blocks_a_scrape_nor_holds_on(
    started: list[MetricsEndpoint],
) -> None:
    endpoint = start(started, socket_timeout_ms=500)
    with socket.create_connection(("127.0.0.1", endpoint.port)) as stalled:
        stalled.sendall(b"GET /metr")  # half a request line, then nothing
        began = time.monotonic()
        assert scrape(endpoint.url)[0] == 200
        assert time.monotonic() - began < 1
        stalled.settimeout(SCRAPE_TIMEOUT_S)
        assert stalled.recv(1024) == b""  # the server hung up on it
        assert time.monotonic() - began < SCRAPE_TIMEOUT_S - 1


def test_a_client_stalling_the_tls_handshake_does_not_block_a_scrape(
    started: list[MetricsEndpoint], pki: Path
) -> None:
    endpoint = start(started, socket_timeout_ms=500, **tls_options(pki))
    with socket.create_connection(("127.0.0.1", endpoint.port)) as stalled:  # no ClientHello
        assert scrape(endpoint.url, context=client_context(pki))[0] == 200
        stalled.settimeout(SCRAPE_TIMEOUT_S)
        assert stalled.recv(1024) == b""


def test_connections_beyond_the_limit_are_closed_at_once(started: list[MetricsEndpoint]) -> None:
    endpoint = start(started)
    idle = [socket.create_connection(("127.0.0.1", endpoint.port)) for _ in range(CONNECTIONS_MAX)]
    try:
        with socket.create_connection(("127.0.0.1", endpoint.port)) as extra:
            extra.settimeout(SCRAPE_TIMEOUT_S)
            assert extra.recv(1024) == b""
    finally:
        for connection in idle:
            connection.close()
    # The idle ones' threads see them close and give their places back.
    deadline = time.monotonic() + SCRAPE_TIMEOUT_S
    while True:
        try:
            assert scrape(endpoint.url)[0] == 200
            break
        except (urllib.error.URLError, http.client.HTTPException, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# The start-up warning


def test_a_reachable_endpoint_without_a_token_or_tls_is_warned_about() -> None:
    assert ServerConfig(metrics_port=0).check_exposure() is None
    assert ServerConfig(metrics_port=-1, metrics_host="0.0.0.0").check_exposure() is None
    assert ServerConfig(metrics_port=0, metrics_host="::1").check_exposure() is None
    assert ServerConfig(metrics_port=0, metrics_host="localhost").check_exposure() is None
    open_metrics = ServerConfig(metrics_port=9464, metrics_host="0.0.0.0").check_exposure()
    assert open_metrics is not None
    assert "serving metrics on 0.0.0.0 without a token" in open_metrics
    assert "--metrics-token-file" in open_metrics
    clear = ServerConfig(
        metrics_port=9464, metrics_host="10.0.0.5", metrics_token_file="t"
    ).check_exposure()
    assert clear is not None and "--metrics-tls-cert" in clear
    secured = ServerConfig(
        metrics_port=9464,
        metrics_host="10.0.0.5",
        metrics_token_file="t",
        metrics_tls_cert_file="c",
        metrics_tls_key_file="k",
    )
    assert secured.check_exposure() is None
    # With the gRPC server's own warning: both, in one line.
    both = ServerConfig(
        host="0.0.0.0", insecure=True, metrics_port=9464, metrics_host="0.0.0.0"
    ).check_exposure()
    assert both is not None and "--insecure" in both and "serving metrics on 0.0.0.0" in both


def test_the_metrics_host_must_not_be_empty() -> None:
    with pytest.raises(InvalidConfigError, match="metrics_host is '', expected an address"):
        ServerConfig(metrics_host="")


# The serve flags


def serve_config(monkeypatch: pytest.MonkeyPatch, *flags: str) -> ServerConfig:
    """The ServerConfig ``twinlog serve FLAGS`` would serve with (nothing is served)."""
    import twinlog.rpc.cli.serve as cli_serve
    import twinlog.rpc.server.server as server_module

    seen: list[ServerConfig] = []
    monkeypatch.setattr(cli_serve, "configure_server_logging", lambda *_: None)
    monkeypatch.setattr(server_module, "serve", lambda _dir, config, *_: seen.append(config) or 0)
    args = build_parser().parse_args(["serve", "--data-dir", "unused", *flags])
    assert args.run(args) == 0
    [config] = seen
    return config


def test_the_serve_flags_reach_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    config = serve_config(
        monkeypatch,
        "--host", "0.0.0.0",
        "--metrics-port", "9464",
        "--metrics-host", "10.0.0.5",
        "--metrics-token-file", "token.txt",
        "--metrics-tls-cert", "metrics.pem",
        "--metrics-tls-key", "metrics.key",
    )  # fmt: skip
    assert config.host == "0.0.0.0"
    assert (config.metrics_port, config.metrics_host) == (9464, "10.0.0.5")
    assert config.metrics_token_file == "token.txt"
    assert (config.metrics_tls_cert_file, config.metrics_tls_key_file) == (
        "metrics.pem",
        "metrics.key",
    )
    # Without the flags: loopback, whatever --host is, and the config keys work too.
    config = serve_config(monkeypatch, "--host", "0.0.0.0", "--metrics-port", "0")
    assert config.metrics_host == "127.0.0.1" and config.metrics_token_file is None
    keyed = server_config_from({"metrics-host": "::1", "metrics.token.file": "t"})
    assert (keyed.metrics_host, keyed.metrics_token_file) == ("::1", "t")
