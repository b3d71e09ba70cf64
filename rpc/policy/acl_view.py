"""The grants in force on a broker: the ACL file's and the store's, together (a union: a
principal may do what either grants).

``--acl-file`` turns ACLs on and seeds them: its grants apply as written, for as long as
the file says so, and cannot be removed at run time (a removal of one is refused, naming
the file). Grants added at run time (``twinlog acls add``, Kafka's CreateAcls) are kept
in the broker's store (``acl_store``) and apply beside them; a change reaches this
broker's checks through the store's watch, each with an ``acl.applied`` audit line.

Without ``--acl-file`` there are no ACLs (every authenticated principal may do
everything), and ACL administration is refused: there would be nothing to enforce.

``live_acl`` gives one view per store and ACL file in a process, so both doors of a
server (the gRPC services and the Kafka listener) share it and each change is audited
once.

Thread rule: any thread; a change replaces the stored grants as a whole.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

from twinlog.rpc.policy.acl_bindings import Source, describe_grant
from twinlog.rpc.policy.acl_store import AclStore
from twinlog.rpc.policy.audit import audit
from twinlog.rpc.policy.auth import Acl, Grant, IndexedGrants

AUDITED_GRANTS_MAX = 10  # grants named on one acl.applied line; the rest are counted


class LiveAcl(Acl):
    def __init__(self, file_grants: Sequence[Grant], store: AclStore, acl_file: str) -> None:
        super().__init__(file_grants)
        self.file_grants = tuple(file_grants)
        self.store = store
        self.acl_file = acl_file
        self._stored: tuple[Grant, ...] = ()
        self._started = False
        myself = weakref.ref(self)

        def on_change(grants: tuple[Grant, ...]) -> bool:
            live = myself()
            if live is None:
                return False  # this view is gone: no more calls
            live._apply(grants)
            return True

        store.watch(on_change)
        self._started = True

    @property
    def stored(self) -> tuple[Grant, ...]:
        return self._stored

    def source_of(self, grant: Grant) -> Source:
        return Source.FILE if grant in self.file_grants else Source.STORE

    def _apply(self, grants: tuple[Grant, ...]) -> None:
        old = self._stored
        self._indexed = IndexedGrants.of(self.file_grants + grants)  # one swap: checks see both
        self._stored = grants
        if not self._started:
            return  # the grants read at start: nothing changed
        added = [grant for grant in grants if grant not in old]
        removed = [grant for grant in old if grant not in grants]
        if added or removed:
            audit(
                "acl.applied",
                store=self.store.where,
                stored_grants=len(grants),
                added=_named(added),
                removed=_named(removed),
            )


def _named(grants: list[Grant]) -> str:
    shown = "; ".join(describe_grant(grant) for grant in grants[:AUDITED_GRANTS_MAX])
    more = len(grants) - AUDITED_GRANTS_MAX
    return shown + (f"; and {more} more" if more > 0 else "")


_views: weakref.WeakValueDictionary[tuple[int, str, tuple[Grant, ...]], LiveAcl] = (
    weakref.WeakValueDictionary()
)
_views_lock = threading.Lock()


def live_acl(file_grants: Sequence[Grant], store: AclStore, acl_file: str) -> LiveAcl:
    """The one view of ``store`` with these file grants in this process."""
    key = (id(store), acl_file, tuple(file_grants))
    with _views_lock:
        view = _views.get(key)
        if view is None:
            view = _views[key] = LiveAcl(file_grants, store, acl_file)
        return view
