"""A bootstrap list, ``"h1:p1,h2:p2,h3:p3"`` (Kafka's ``bootstrap.servers``), parsed.

A target with a comma is a cluster's bootstrap list (``connection.connect``); one
address with a trailing comma (``"h1:p1,"``) is a list of one, for a cluster reached
through a single broker. The addresses are only where the client first asks for the
cluster's metadata: after that it talks to the brokers the metadata names.
"""

from __future__ import annotations

from twinlog.engine.base.addresses import parse_host_port
from twinlog.engine.base.errors import InvalidConfigError


def is_bootstrap_list(target: str) -> bool:
    return "," in target


def parse_bootstrap(text: str) -> list[str]:
    """The ``host:port`` addresses of ``text``, in order, without blanks or repeats."""
    addresses: list[str] = []
    for part in text.split(","):
        address = part.strip()
        if not address:
            continue
        parse_host_port(address, "bootstrap address", example="127.0.0.1:7070")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise InvalidConfigError(
            f"bootstrap list {text!r} names no server; give host:port[,host:port...]"
        )
    return addresses
