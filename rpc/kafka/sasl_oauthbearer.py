"""SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255) onto twinlog's tokens file: the bearer
token a client presents is an opaque token of the tokens file, and the connection becomes
its principal, as a gRPC call's ``Authorization: Bearer`` header does.

The client's one message is ``gs2-header kvsep *(key=value kvsep) kvsep``, kvsep being
``\\x01`` (``n,,\\x01auth=Bearer TOKEN\\x01\\x01``; ``n,a=alice,...`` names an authorization
id, which must then be the token's principal). Extensions (other keys) are ignored, as
Kafka's default validator does without a callback for them. Tokens are opaque: a JWT from
an identity provider is not validated here (no issuer, no signature check); a client whose
token provider returns the tokens file's token (kafka-python's ``sasl_oauth_token_provider``,
confluent-kafka's ``oauth_cb``) authenticates. A refusal is answered at once
(SASL_AUTHENTICATION_FAILED and the connection closed, as PLAIN's), not with RFC 7628's
error challenge: both clients report it as a failed login.
"""

from __future__ import annotations

from twinlog.rpc.policy.auth import Principal, TokenTable

OAUTHBEARER = "OAUTHBEARER"
KVSEP = b"\x01"
BEARER = "bearer "


def oauthbearer_proven(auth_bytes: bytes, tokens: TokenTable) -> tuple[Principal | None, str, str]:
    """The principal the message's bearer token is, or None; the authorization id it names
    (``-``: none); why not (never quoting the token)."""
    try:
        text = auth_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return None, "-", "an OAUTHBEARER message is UTF-8 text"
    header, separator, rest = text.partition("\x01")
    if not separator or not rest.endswith("\x01\x01") or not header.startswith("n,"):
        return (
            None,
            "-",
            (
                "an OAUTHBEARER message is 'n,[a=AUTHZID],' then \\x01-separated key=value "
                "pairs ending in \\x01\\x01 (RFC 7628)"
            ),
        )
    authzid = _authzid(header)
    if authzid is None:
        return None, "-", "the gs2 header is 'n,,' or 'n,a=AUTHZID,'"
    pairs = dict(pair.split("=", 1) for pair in rest[:-2].split("\x01") if pair and "=" in pair)
    auth = pairs.get("auth", "")
    if not auth.lower().startswith(BEARER) or not auth[len(BEARER) :].strip():
        return None, authzid or "-", "the message carries no 'auth=Bearer TOKEN' pair"
    principal = tokens.principal_of(auth[len(BEARER) :].strip())
    if principal is None:
        return None, authzid or "-", "the bearer token is not in the tokens file"
    if authzid and authzid != principal.name:
        return None, authzid, f"the token's principal may not act as {authzid!r}"
    return principal, authzid or principal.name, ""


def _authzid(header: str) -> str | None:
    """'' for ``n,,``; the name of ``n,a=NAME,``; None for anything else."""
    if header == "n,,":
        return ""
    if header.startswith("n,a=") and header.endswith(",") and len(header) > len("n,a=,"):
        return header[len("n,a=") : -1]
    return None
