"""``twinlog cluster certs``: the CA and broker certificates it writes (keys 0600, names and
uses a broker needs), the CA reused by a second run, the flags it prints, its help."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from server_process import run_cli

from twinlog.rpc.cli.main import main
from twinlog.rpc.replication.broker_identity import BrokerTls


def certs(capsys: pytest.CaptureFixture[str], out: Path, brokers: str) -> list[str]:
    assert main(["cluster", "certs", "--out", str(out), "--brokers", brokers]) == 0
    return capsys.readouterr().out.splitlines()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_certs_writes_a_ca_and_one_certificate_per_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "certs"
    printed = certs(capsys, out, "2,1")
    assert sorted(path.name for path in out.iterdir()) == [
        "broker-1.key", "broker-1.pem", "broker-2.key", "broker-2.pem", "ca.key", "ca.pem",
    ]  # fmt: skip
    for key in ("ca.key", "broker-1.key", "broker-2.key"):
        assert mode(out / key) == 0o600, key
    ca = certificate(out / "ca.pem")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for broker_id in (1, 2):
        pem = out / f"broker-{broker_id}.pem"
        # BrokerTls.load is what twinlog serve runs: name, signature and key all checked
        BrokerTls.load(
            broker_id, str(pem), str(out / f"broker-{broker_id}.key"), str(out / "ca.pem")
        )
        made = certificate(pem)
        name = f"twinlog-broker-{broker_id}"
        [common_name] = made.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        assert common_name.value == name
        sans = made.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.DNSName) == [name]
        uses = made.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert set(uses) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
        assert not made.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert printed[:2] == [
        f"broker {broker_id}: --inter-broker-tls-cert {out}/broker-{broker_id}.pem "
        f"--inter-broker-tls-key {out}/broker-{broker_id}.key --inter-broker-tls-ca {out}/ca.pem"
        for broker_id in (1, 2)
    ]
    assert f"keep {out}/ca.key off the brokers" in printed[2]


def test_a_second_run_reuses_the_ca_and_keeps_existing_brokers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "certs"
    certs(capsys, out, "1,2")
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    printed = certs(capsys, out, "3,1")
    after = {path.name: path.read_bytes() for path in out.iterdir()}
    assert set(after) == {*before, "broker-3.pem", "broker-3.key"}
    assert all(after[name] == data for name, data in before.items())  # nothing rewritten
    ca = certificate(out / "ca.pem")
    certificate(out / "broker-3.pem").verify_directly_issued_by(ca)
    BrokerTls.load(3, str(out / "broker-3.pem"), str(out / "broker-3.key"), str(out / "ca.pem"))
    assert mode(out / "broker-3.key") == 0o600
    assert [line.split(":")[0] for line in printed[:2]] == ["broker 1", "broker 3"]


@pytest.mark.parametrize("brokers", ["", "1,x", "-1", "1;2"])
def test_certs_refuses_a_list_that_is_no_broker_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], brokers: str
) -> None:
    assert main(["cluster", "certs", "--out", str(tmp_path / "certs"), "--brokers", brokers]) == 2
    assert f"--brokers {brokers!r}: give broker ids" in capsys.readouterr().err
    assert not (tmp_path / "certs").exists()


def test_certs_help_shows_an_example() -> None:
    result = run_cli("cluster", "certs", "--help")
    assert result.returncode == 0, result.stderr
    assert "example:" in result.stdout
    assert "twinlog cluster certs --out ./certs --brokers 1,2,3" in result.stdout
    assert "--inter-broker-tls-cert certs/broker-1.pem" in result.stdout


def test_a_ca_certificate_without_its_key_is_refused_not_replaced(tmp_path: Path) -> None:
    """A new CA would leave the kept broker certificates unverifiable."""
    from twinlog.engine.base.errors import InvalidConfigError
    from twinlog.rpc.cli.cluster_certs import make_broker_certificates

    make_broker_certificates(tmp_path, [1])
    (tmp_path / "ca.key").unlink()
    ca_before = (tmp_path / "ca.pem").read_bytes()
    with pytest.raises(InvalidConfigError, match=r"without ca\.key"):
        make_broker_certificates(tmp_path, [1, 2])
    assert (tmp_path / "ca.pem").read_bytes() == ca_before
    assert not (tmp_path / "broker-2.pem").exists()


def test_a_kept_broker_certificate_of_another_ca_is_refused(tmp_path: Path) -> None:
    from twinlog.engine.base.errors import InvalidConfigError
    from twinlog.rpc.cli.cluster_certs import make_broker_certificates

    make_broker_certificates(tmp_path / "old", [1])
    make_broker_certificates(tmp_path / "new", [2])
    for suffix in ("pem", "key"):
        (tmp_path / "new" / f"broker-1.{suffix}").write_bytes(
            (tmp_path / "old" / f"broker-1.{suffix}").read_bytes()
        )
    with pytest.raises(InvalidConfigError, match="not issued by the CA"):
        make_broker_certificates(tmp_path / "new", [1])
