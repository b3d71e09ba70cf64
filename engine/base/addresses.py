"""TCP ports and ``HOST:PORT`` addresses, checked and parsed in one place.

One range: a port is 1..65535. Port 0 is not a port to connect to or to register for
others; it asks the operating system for any free port when a listener binds. So what
binds (the gRPC server, the Kafka listener, the inter-broker listener, the metrics
endpoint) passes ``any_port=True``, and what is connected to or advertised (bootstrap
addresses, advertised ports) does not.

An address is ``HOST:PORT``, the port after the last colon. An IPv6 host goes in
brackets, ``[::1]:9092`` (the brackets are not part of the host); an unbracketed one
is read only when what stands before the last colon is an IPv6 address
(``::1:9092``), and refused otherwise (``::1`` is not host ``:`` and port 1).
Every refusal is an ``InvalidConfigError`` that names the setting, what was wrong and
what to write instead.
"""

from __future__ import annotations

import ipaddress

from twinlog.engine.base.errors import InvalidConfigError

PORT_MIN = 1
PORT_MAX = 65_535
ANY_PORT = 0  # a listener given it binds any free port


def port_range(any_port: bool = False) -> str:
    """The ports a setting takes, as its refusals say it."""
    if any_port:
        return f"{ANY_PORT}..{PORT_MAX} ({ANY_PORT} picks a free one)"
    return f"{PORT_MIN}..{PORT_MAX}"


def is_port(port: int, any_port: bool = False) -> bool:
    return PORT_MIN <= port <= PORT_MAX or (any_port and port == ANY_PORT)


def check_port(port: int, what: str, *, any_port: bool = False, otherwise: str = "") -> int:
    """``port`` if it is one (``any_port``: 0 too), else InvalidConfigError naming ``what``
    (``otherwise``: the other value it may take, e.g. "or -1 for no metrics endpoint")."""
    if is_port(port, any_port):
        return port
    raise _port_refusal(what, port, any_port, otherwise)


def parse_port(text: str, what: str, *, any_port: bool = False, otherwise: str = "") -> int:
    """The port ``text`` writes in decimal digits, checked as ``check_port`` does."""
    digits = text.strip()
    if digits.isascii() and digits.isdigit() and is_port(int(digits), any_port):
        return int(digits)
    raise _port_refusal(what, repr(text), any_port, otherwise)


def _port_refusal(what: str, value: object, any_port: bool, otherwise: str) -> InvalidConfigError:
    also = f", {otherwise}" if otherwise else ""
    return InvalidConfigError(f"{what} is {value}: give a TCP port, {port_range(any_port)}{also}")


def parse_host_port(
    text: str, what: str, *, any_port: bool = False, example: str = "127.0.0.1:9092"
) -> tuple[str, int]:
    """``HOST:PORT`` (``[IPv6]:PORT`` too) as ``(host, port)``, the host without brackets.

    ``what`` names the setting in a refusal ("bootstrap address", "--kafka-listener");
    ``any_port``: port 0 is taken (an address to bind); ``example``: an address the
    refusal shows, with the setting's usual port."""
    host, port_text, problem = _split_host_port(text.strip())
    if problem is None and not (port_text.isascii() and port_text.isdigit()):
        problem = f"port {port_text!r} is not a number"
    elif problem is None and not is_port(int(port_text), any_port):
        problem = f"port must be {ANY_PORT if any_port else PORT_MIN}..{PORT_MAX}"
    if problem is not None:
        port = example.rpartition(":")[2]
        free = f" (port {ANY_PORT} picks a free one)" if any_port else ""
        raise InvalidConfigError(
            f"{what} {text!r}: {problem}; write HOST:PORT, e.g. {example} or [::1]:{port}{free}"
        )
    return host, int(port_text)


def _split_host_port(address: str) -> tuple[str, str, str | None]:
    """The host and the port's text of ``address``, and what is wrong with them (None:
    nothing yet; the port's text is checked by the caller)."""
    if address.startswith("["):
        host, bracket, rest = address[1:].partition("]")
        if not bracket:
            return host, "", "no ']' after the IPv6 host"
        if rest and not rest.startswith(":"):
            return host, "", f"{rest!r} after the bracketed host, where ':PORT' goes"
        port_text = rest[1:]
    else:
        host, colon, port_text = address.rpartition(":")
        if not colon:
            return address, "", "no port"
        if "[" in host or "]" in host:
            return host, port_text, "a bracket without its pair"
        if ":" in host and not _is_ipv6(host):
            return host, port_text, "an IPv6 host goes in brackets"
    if not port_text:
        return host, port_text, "no port"
    if not host:
        return host, port_text, "no host"
    return host, port_text, None


def _is_ipv6(host: str) -> bool:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True


def join_host_port(host: str, port: int) -> str:
    """``host:port`` as gRPC and the logs write it: an IPv6 host in brackets."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"
