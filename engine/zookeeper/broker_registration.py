"""Broker membership: the EPHEMERAL ``brokers/ids/<id>`` of each live broker.

    brokers/ids/<id>   {"host": str, "port": int, "data_dir_id": hex32,
                        "inter_broker_host": str, "inter_broker_port": int,   (optional)
                        "kafka_host": str, "kafka_port": int}                 (optional)

``host:port`` is where clients reach the broker (Metadata names it); the optional
``inter_broker_*`` pair is where other brokers do (replica fetches, coordination calls),
when it differs: Kafka's separate inter-broker listener. Without it, brokers use
``host:port`` too. The optional ``kafka_*`` pair is where Kafka clients reach the broker's
Kafka listener (``twinlog serve --kafka-listener``), so that any broker's Kafka Metadata
answer names every other broker's; a broker without one has neither key.

A broker is alive exactly while its ZooKeeper session holds this znode: ZooKeeper deletes
it when the session closes or expires, and the controller acts on that. The broker epoch
is the znode's czxid (KIP-380): every registration gets a larger one, so a request or an
ISR membership stamped with an older epoch belongs to a previous incarnation of the broker
and is refused (a restarted broker, even with the same id, must re-sync first: KIP-903).

Two live brokers never share an id: the second registration is refused (InvalidConfigError
naming the holder). A broker that restarts faster than ZooKeeper expires its previous
session (a SIGKILL, then a supervisor's restart) meets its own old registration: one that
names this broker's data directory, which this process holds locked, so its holder is
dead. The broker waits that session out (``PREVIOUS_RUN_WAIT_TIMEOUTS`` session timeouts at
most, with a log line), then registers: a restart loop under systemd or Kubernetes comes
back instead of exiting until its restart limit is spent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import WatchedEvent

from twinlog.engine.base.errors import InvalidConfigError
from twinlog.engine.zookeeper import znodes
from twinlog.engine.zookeeper.session import ZooKeeperSession

log = logging.getLogger(__name__)

KEYS = ("host", "port", "data_dir_id")
REGISTER_ATTEMPTS_MAX = 5
# How long a broker waits for its previous run's registration to go: that session's
# timeout is not in ZooKeeper's answer, so two of this session's (the same configuration,
# as a restart has, expires within one plus ZooKeeper's tick); a holder still there after
# that is a live process with a copy of this directory, and is refused.
PREVIOUS_RUN_WAIT_TIMEOUTS = 2


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    data_dir_id: str
    broker_epoch: int  # the registration's czxid
    inter_broker_host: str = ""  # "" and 0: other brokers use host:port
    inter_broker_port: int = 0
    kafka_host: str = ""  # "" and 0: no Kafka listener
    kafka_port: int = 0

    @property
    def address(self) -> str:
        """Where clients reach the broker."""
        return f"{self.host}:{self.port}"

    @property
    def inter_broker_address(self) -> str:
        """Where other brokers reach it."""
        if self.inter_broker_port:
            return f"{self.inter_broker_host or self.host}:{self.inter_broker_port}"
        return self.address


@dataclass(frozen=True)
class BrokerRegistration:
    """This broker's registration, held by ``session``: gone when the session ends."""

    info: BrokerInfo
    path: str

    @property
    def broker_epoch(self) -> int:
        return self.info.broker_epoch


def register_broker(
    session: ZooKeeperSession,
    broker_id: int,
    host: str,
    port: int,
    data_dir_id: str,
    inter_broker: tuple[str, int] | None = None,
    kafka: tuple[str, int] | None = None,
) -> BrokerRegistration:
    """Register this broker as live; InvalidConfigError if another live broker has the id.
    ``inter_broker``: (host, port) other brokers reach it at, when not ``host:port``;
    ``kafka``: (host, port) of its Kafka listener, when it has one."""
    if not isinstance(broker_id, int) or isinstance(broker_id, bool) or broker_id < 0:
        raise InvalidConfigError(f"broker_id is {broker_id!r}, expected an integer 0 or more")
    client = session.client
    path = znodes.broker_path(broker_id)
    fields: dict[str, object] = {"host": host, "port": port, "data_dir_id": data_dir_id}
    if inter_broker is not None:
        fields.update(inter_broker_host=inter_broker[0], inter_broker_port=inter_broker[1])
    if kafka is not None:
        fields.update(kafka_host=kafka[0], kafka_port=kafka[1])
    value = znodes.encode(fields)
    session.wait(client.ensure_path_async(znodes.BROKER_IDS))
    waited_for_previous_run = False
    for _attempt in range(REGISTER_ATTEMPTS_MAX):
        try:
            _path, stat = session.wait(
                client.create_async(path, value, ephemeral=True, include_data=True)
            )
        except NodeExistsError:
            holder, owner = _read(session, broker_id)
            if holder is None:
                continue  # gone since: the holder's session just ended
            if owner == client.client_id[0]:
                # Ours: an earlier attempt whose answer was lost had been applied after all.
                return BrokerRegistration(holder, path)
            if holder.data_dir_id == data_dir_id and not waited_for_previous_run:
                waited_for_previous_run = True
                _wait_previous_run_gone(session, broker_id, holder, owner)
                continue
            raise InvalidConfigError(
                f"broker_id {broker_id} is registered by the live broker at "
                f"{holder.address} (data directory {holder.data_dir_id}): give this broker "
                "another broker_id, or stop that one"
                + (
                    ". It names this broker's data directory and outlived "
                    f"{PREVIOUS_RUN_WAIT_TIMEOUTS} ZooKeeper session timeouts "
                    f"({session.session_timeout_ms} ms each): a live copy of this directory "
                    "runs elsewhere"
                    if waited_for_previous_run
                    else ""
                )
            ) from None
        info = _decode(broker_id, value, stat.czxid)
        return BrokerRegistration(info, path)
    raise InvalidConfigError(
        f"broker_id {broker_id}: its registration appeared and vanished "
        f"{REGISTER_ATTEMPTS_MAX} times in a row; is another broker with this id restarting "
        "in a loop?"
    )


def _wait_previous_run_gone(
    session: ZooKeeperSession, broker_id: int, holder: BrokerInfo, owner: int
) -> None:
    """Wait until the registration of this broker's previous run (``owner``'s session) is
    gone, ``PREVIOUS_RUN_WAIT_TIMEOUTS`` session timeouts at most; the caller then tries
    again (and refuses a holder still there)."""
    wait_s = PREVIOUS_RUN_WAIT_TIMEOUTS * session.session_timeout_ms / 1000
    log.warning(
        "broker_id %d is still registered by this data directory's previous run (ZooKeeper "
        "session 0x%x, broker epoch %d, at %s): it was stopped without closing its session. "
        "Waiting up to %.0f s for ZooKeeper to expire it",
        broker_id,
        owner,
        holder.broker_epoch,
        holder.address,
        wait_s,
    )
    started_s = time.monotonic()
    deadline_s = started_s + wait_s
    path = znodes.broker_path(broker_id)
    while True:
        changed = threading.Event()
        stat = session.wait(session.client.exists_async(path, watch=_setter(changed)))
        if stat is None or int(stat.ephemeralOwner) != owner:
            log.info(
                "broker_id %d: the previous run's registration expired after %.1f s",
                broker_id,
                time.monotonic() - started_s,
            )
            return
        remaining_s = deadline_s - time.monotonic()
        if remaining_s <= 0:
            return
        changed.wait(remaining_s)


def _setter(event: threading.Event) -> Callable[[WatchedEvent], None]:
    """A watch that sets ``event`` (on kazoo's thread: it must not block)."""
    return lambda _watched: event.set()


def live_brokers(
    session: ZooKeeperSession, watch: Callable[[WatchedEvent], None] | None = None
) -> dict[int, BrokerInfo]:
    """Every registered broker, by id. ``watch`` (called once, on kazoo's thread: it must
    not block) is set on the listing: a broker that comes or goes after it fires it."""
    client = session.client
    session.wait(client.ensure_path_async(znodes.BROKER_IDS))
    children = session.wait(client.get_children_async(znodes.BROKER_IDS, watch=watch))
    pending = {
        int(child): client.get_async(znodes.broker_path(int(child)))
        for child in children
        if child.isdigit()
    }
    found: dict[int, BrokerInfo] = {}
    for broker_id, request in pending.items():
        try:
            data, stat = session.wait(request)
        except NoNodeError:
            continue  # its session ended since the listing
        found[broker_id] = _decode(broker_id, data, stat.czxid)
    return found


def _read(session: ZooKeeperSession, broker_id: int) -> tuple[BrokerInfo | None, int]:
    """The registration of ``broker_id`` and its owner's session id; (None, 0) if none."""
    try:
        data, stat = session.wait(session.client.get_async(znodes.broker_path(broker_id)))
    except NoNodeError:
        return None, 0
    return _decode(broker_id, data, stat.czxid), int(stat.ephemeralOwner)


def _decode(broker_id: int, data: bytes, czxid: int) -> BrokerInfo:
    value = znodes.decode(znodes.broker_path(broker_id), data, KEYS)
    return BrokerInfo(
        broker_id,
        str(value["host"]),
        int(value["port"]),
        str(value["data_dir_id"]),
        czxid,
        str(value.get("inter_broker_host", "")),
        int(value.get("inter_broker_port", 0)),
        str(value.get("kafka_host", "")),
        int(value.get("kafka_port", 0)),
    )
