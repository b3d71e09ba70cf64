"""The door of the inter-broker services: who calls (``broker_identity``) and may they
(``internal_checks``), with every refusal reported (the server audits it).

    guard = InternalGuard(checks, brokers_authenticate=True, on_refused=audit_refusal)
    caller = guard.admit(context, "coordination.apply_commit",
                         lambda caller: checks.check_coordinator(caller, T, epochs))

``brokers_authenticate``: the services are served on the inter-broker listener, whose TLS
made every caller show a certificate the cluster CA signed; ``admit`` then requires a
broker's name in it. Without it (a cluster without broker certificates, which
``twinlog serve`` allows only when clients need no credentials either) the caller is
None and only what does not need its identity is checked. No ``checks``: nothing is
checked (in-process test fakes only; ``RpcServer`` always passes them).

Thread rule: immutable; any thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from twinlog.engine.base.errors import TwinlogError
from twinlog.rpc.replication.broker_identity import caller_broker_id
from twinlog.rpc.replication.internal_checks import InternalCallChecks

# (method, peer, caller broker id or None, the refusal): the server's audit line.
RefusalReport = Callable[[str, str, "int | None", TwinlogError], None]


def _ignore(method: str, peer: str, caller: int | None, error: TwinlogError) -> None:
    return None


@dataclass(frozen=True)
class InternalGuard:
    checks: InternalCallChecks | None = None
    brokers_authenticate: bool = False
    on_refused: RefusalReport = field(default=_ignore)

    def admit(
        self,
        context: grpc.ServicerContext,
        method: str,
        check: Callable[[InternalCallChecks, int | None], None] | None = None,
    ) -> int | None:
        """The calling broker's id (None without broker certificates), once the call may
        go on; raises (and reports) the refusal otherwise."""
        caller: int | None = None
        try:
            if self.brokers_authenticate:
                caller = caller_broker_id(context)
            if check is not None and self.checks is not None:
                check(self.checks, caller)
        except TwinlogError as error:
            self.on_refused(method, context.peer(), caller, error)
            raise
        return caller
