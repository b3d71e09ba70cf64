"""A throwaway certificate authority made by the ``openssl`` command at test time (no tests
here): for the TLS tests of the gRPC server and of the Kafka listener.

Keys are RSA 2048 and live one day; nothing is cached between test sessions.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def openssl(*arguments: str, cwd: Path) -> None:
    subprocess.run(["openssl", *arguments], cwd=cwd, check=True, capture_output=True)


def make_pki(directory: Path) -> Path:
    """ca.pem; server.pem/.key for 127.0.0.1 and localhost; client.pem/.key (CN=alice).

    Two calls make two unrelated authorities: one's ca.pem does not verify the other's
    certificates (the wrong-CA tests need that)."""
    directory.mkdir(parents=True, exist_ok=True)
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=twinlog test CA",
        "-keyout", "ca.key", "-out", "ca.pem", cwd=directory,
    )  # fmt: skip
    (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, subject in (("server", "/CN=localhost"), ("client", "/CN=alice")):
        openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory,
        )  # fmt: skip
        extra = ["-extfile", "server.ext"] if name == "server" else []
        openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "1", "-out", f"{name}.pem", *extra, cwd=directory,
        )  # fmt: skip
    return directory
