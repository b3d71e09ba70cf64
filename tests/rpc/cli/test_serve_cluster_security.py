"""``twinlog serve``'s start-up refusals for a cluster broker's security: client credentials
without broker certificates, partial ``--inter-broker-tls-*``, an ``--inter-broker-listener``
without certificates or malformed, a certificate for another broker. Each is one error
line and exit 1, before anything is opened: the ZooKeeper named (127.0.0.1:1) listens on
nothing, so a broker that got as far as joining it would hang, and the data directory is
never made.

The rules themselves (``check_cluster_security``, ``InterBrokerFlags``,
``listener_address``) are tested in-process first; the commands run in subprocesses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from server_process import run_cli

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.rpc.cli.cluster_certs import BrokerCertFiles, make_broker_certificates
from twinlog.rpc.server.config import ServerConfig
from twinlog.rpc.server.inter_broker import (
    InterBrokerFlags,
    check_cluster_security,
    listener_address,
)

NOBODY = "127.0.0.1:1"  # a ZooKeeper that is not there
TLS_FLAGS = ("--inter-broker-tls-cert", "--inter-broker-tls-key", "--inter-broker-tls-ca")
REFUSED_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[int, BrokerCertFiles]:
    return make_broker_certificates(tmp_path_factory.mktemp("certs"), [1, 2])


def flags_of(files: BrokerCertFiles, listener: str | None = None) -> InterBrokerFlags:
    return InterBrokerFlags(listener, str(files.certificate), str(files.key), str(files.ca))


# --- the rules, in-process ---------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        ServerConfig(tokens_file="tokens.txt"),
        ServerConfig(acl_file="acl.txt"),
        ServerConfig(tls_client_ca_file="ca.pem", tls_cert_file="s.pem", tls_key_file="s.key"),
    ],
    ids=["tokens", "acl", "client-certificates"],
)
def test_client_credentials_without_broker_certificates_are_refused(config: ServerConfig) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        check_cluster_security(config, InterBrokerFlags())
    for flag in TLS_FLAGS:
        assert flag in str(refused.value)
    assert "twinlog cluster certs" in str(refused.value)


def test_client_credentials_with_broker_certificates_are_accepted(
    certificates: dict[int, BrokerCertFiles],
) -> None:
    check_cluster_security(ServerConfig(tokens_file="tokens.txt"), flags_of(certificates[1]))


def test_a_cluster_without_any_credentials_may_run_without_certificates() -> None:
    check_cluster_security(ServerConfig(), InterBrokerFlags())  # a development cluster


def test_a_locked_zookeeper_without_broker_certificates_is_refused() -> None:
    """Znodes only the brokers may touch, and internal services anyone may call, would be
    a lock on the back door with the front one open."""
    with pytest.raises(InvalidConfigError, match="--zookeeper-auth-file"):
        check_cluster_security(ServerConfig(), InterBrokerFlags(), zookeeper_locked=True)


@pytest.mark.parametrize("given", [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2)])
def test_partial_tls_files_are_refused(given: tuple[int, ...]) -> None:
    files = ["c.pem", "k.pem", "ca.pem"]
    flags = InterBrokerFlags(None, *(files[i] if i in given else None for i in range(3)))
    with pytest.raises(InvalidConfigError, match="give all three of --inter-broker-tls-cert"):
        check_cluster_security(ServerConfig(), flags)


def test_a_listener_without_certificates_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="--inter-broker-listener serves"):
        check_cluster_security(ServerConfig(), InterBrokerFlags("127.0.0.1:7071"))


@pytest.mark.parametrize(
    "listener", ["7071", "127.0.0.1", "127.0.0.1:", ":7071", "127.0.0.1:x", "127.0.0.1:70000"]
)
def test_a_malformed_listener_is_refused(listener: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape("write HOST:PORT, e.g. 127.0.0.1:7071")):
        listener_address(InterBrokerFlags(listener), ServerConfig())


@pytest.mark.parametrize(
    ("listener", "address"),
    [
        (None, ("10.0.0.5", 0)),  # the client host and a free port
        ("127.0.0.1:7071", ("127.0.0.1", 7071)),
        ("[::1]:7071", ("::1", 7071)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
    ],
)
def test_the_listener_address(listener: str | None, address: tuple[str, int]) -> None:
    assert listener_address(InterBrokerFlags(listener), ServerConfig(host="10.0.0.5")) == address


# --- the command -------------------------------------------------------------------------


def serve_refusal(data_dir: Path, *arguments: str) -> str:
    """Run a cluster broker's ``twinlog serve``; the one error line it exits 1 with."""
    result = run_cli(
        "serve", "--data-dir", str(data_dir), "--port", "0",
        "--broker-id", "1", "--zookeeper", NOBODY, *arguments,
        timeout_s=REFUSED_WITHIN_S,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, result.stderr
    assert "serving on" not in result.stderr and "opening broker" not in result.stderr
    assert not data_dir.exists()  # nothing was opened
    return lines[0]


@pytest.mark.slow
def test_serve_refuses_tokens_without_broker_certificates(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("s3cr3t-token-for-alice-0001 alice\n")
    line = serve_refusal(tmp_path / "data", "--tokens-file", str(tokens))
    assert line.startswith("error: InvalidConfigError: this cluster broker requires credentials")
    for flag in TLS_FLAGS:
        assert flag in line


@pytest.mark.slow
def test_serve_refuses_part_of_the_tls_flags(
    tmp_path: Path, certificates: dict[int, BrokerCertFiles]
) -> None:
    files = certificates[1]
    line = serve_refusal(
        tmp_path / "data",
        "--inter-broker-tls-cert", str(files.certificate),
        "--inter-broker-tls-key", str(files.key),
    )  # fmt: skip
    assert "give all three of --inter-broker-tls-cert" in line


@pytest.mark.slow
def test_serve_refuses_a_listener_without_certificates(tmp_path: Path) -> None:
    line = serve_refusal(tmp_path / "data", "--inter-broker-listener", "127.0.0.1:0")
    assert "--inter-broker-listener serves the internal services to brokers only" in line


@pytest.mark.slow
def test_serve_refuses_a_malformed_listener(
    tmp_path: Path, certificates: dict[int, BrokerCertFiles]
) -> None:
    files = certificates[1]
    line = serve_refusal(
        tmp_path / "data",
        "--inter-broker-listener", "127.0.0.1:port",
        "--inter-broker-tls-cert", str(files.certificate),
        "--inter-broker-tls-key", str(files.key),
        "--inter-broker-tls-ca", str(files.ca),
    )  # fmt: skip
    assert "--inter-broker-listener '127.0.0.1:port': port 'port' is not a number" in line


@pytest.mark.slow
def test_serve_refuses_another_brokers_certificate(
    tmp_path: Path, certificates: dict[int, BrokerCertFiles]
) -> None:
    files = certificates[2]  # broker 2's files for broker 1
    line = serve_refusal(
        tmp_path / "data",
        "--inter-broker-tls-cert", str(files.certificate),
        "--inter-broker-tls-key", str(files.key),
        "--inter-broker-tls-ca", str(files.ca),
    )  # fmt: skip
    assert "must name 'twinlog-broker-1'" in line


@pytest.mark.slow
def test_inter_broker_flags_need_a_cluster_broker(tmp_path: Path) -> None:
    result = run_cli(
        "serve", "--data-dir", str(tmp_path / "data"), "--port", "0",
        "--inter-broker-listener", "127.0.0.1:0", timeout_s=REFUSED_WITHIN_S,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "--inter-broker-* and --zookeeper-auth-file are for a cluster broker" in result.stderr
    assert not (tmp_path / "data").exists()
