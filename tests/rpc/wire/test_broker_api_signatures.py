"""The broker API Protocol, the real broker, the remote broker and the test fakes agree
method for method, parameter for parameter.

``BrokerApi`` is what the server serves and the clients call. A fake that drifts from it
(a parameter renamed, a default changed, a method missing) would keep its tests green
while the real broker answered differently; so would ``RemoteBroker``. An implementation
may take more than the Protocol (the embedded broker's ``owner``, ``wait_for_applied``),
only after the Protocol's parameters and only with defaults, so every Protocol call fits.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest
from rpc_fakes import FakeBroker

from twinlog.engine.broker.broker import Broker
from twinlog.rpc.client.remote import RemoteBroker
from twinlog.rpc.wire.broker_api import BrokerApi

IMPLEMENTATIONS = {"Broker": Broker, "RemoteBroker": RemoteBroker, "FakeBroker": FakeBroker}


def protocol_methods() -> dict[str, Callable[..., object]]:
    """The Protocol's own methods (not object's or Protocol's machinery)."""
    return {
        name: member
        for name, member in vars(BrokerApi).items()
        if callable(member) and not name.startswith("_")
    }


def shape(function: Callable[..., object]) -> list[tuple[str, object, object]]:
    """Each parameter's name, kind and default (annotations may differ in spelling)."""
    return [
        (parameter.name, parameter.kind, parameter.default)
        for parameter in inspect.signature(function).parameters.values()
    ]


def misfit(
    found: list[tuple[str, object, object]], declared: list[tuple[str, object, object]]
) -> str | None:
    """Why ``found`` does not take every call ``declared`` allows (None: it does)."""
    if found[: len(declared)] != declared:
        return f"{found[: len(declared)]} != the Protocol's {declared}"
    required = [name for name, _kind, default in found[len(declared) :] if default is EMPTY]
    if required:
        return f"parameters the Protocol does not pass have no default: {required}"
    return None


EMPTY = inspect.Parameter.empty


def test_the_protocol_has_the_everyday_calls() -> None:
    methods = protocol_methods()
    assert {"produce", "fetch", "init_producer", "commit_transaction", "close"} <= set(methods)


@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_each_implementation_has_every_call_with_the_protocols_parameters(name: str) -> None:
    implementation = IMPLEMENTATIONS[name]
    differing = {}
    for method_name, declared in protocol_methods().items():
        found = getattr(implementation, method_name, None)
        if found is None:
            differing[method_name] = "missing"
        elif (why := misfit(shape(found), shape(declared))) is not None:
            differing[method_name] = why
    assert not differing, f"{name} differs from BrokerApi: {differing}"


def test_a_drifted_fake_is_caught() -> None:
    """The check itself: a renamed parameter is a difference."""

    class Drifted(FakeBroker):
        def list_offset(self, topic: str, partition: int, when: str | int) -> int:  # type: ignore[override]
            return 0

    declared = shape(protocol_methods()["list_offset"])
    assert misfit(shape(Drifted.list_offset), declared) is not None
    assert misfit(shape(FakeBroker.list_offset), declared) is None

    def extra_required(self: object, topic: str, partition: int, spec: str | int, x: int) -> int:
        return 0

    assert misfit(shape(extra_required), declared) is not None
