"""``InternalCallChecks``: every row of its table, refused and admitted, against a fake
locator (a cached and a fresh answer per partition, every ask counted) and a fake
registration read (counted, or failing as an unreachable ZooKeeper does)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from twinlog.engine.base.errors import (
    ClusterAuthorizationError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    StaleBrokerEpochError,
    TransactionCoordinatorFencedError,
)
from twinlog.engine.base.types import TopicPartition
from twinlog.engine.broker.internal_topics import TXN_JOURNAL_TOPIC
from twinlog.engine.replication.fetch_calls import ReplicaFetch
from twinlog.engine.transactions.partition_calls import (
    JOURNAL_PARTITIONS_MAX,
    CallEpochs,
    RegisterPartition,
    SettleOffsetsHolder,
    coordinator_partition_of,
)
from twinlog.rpc.replication import internal_checks
from twinlog.rpc.replication.coordination_locator import GONE, Location
from twinlog.rpc.replication.internal_checks import InternalCallChecks, RegisteredEpochs

A, B, C = 1, 2, 3  # broker ids: A calls, B is another broker, C a third
OWNER = 5  # the __txn_journal partition that owns TRANSACTION_ID
TRANSACTION_ID = (77 * JOURNAL_PARTITIONS_MAX) + OWNER
JOURNAL = TopicPartition(TXN_JOURNAL_TOPIC, OWNER)
DATA = TopicPartition("orders", 2)
OFFSETS = TopicPartition("__consumer_offsets", 4)
GROUP = "billing"
EPOCH = 9  # ZooKeeper's leader epoch of JOURNAL


# --- fakes -------------------------------------------------------------------------------


@dataclass
class FakeLocator:
    """``cached``: what a plain ask answers; ``fresh``: what a refresh answers (an absent
    key is None: no live leader, or ZooKeeper unreadable). ``asks`` records each ask."""

    cached: dict[TopicPartition, Location | None] = field(default_factory=dict)
    fresh: dict[TopicPartition, Location | None] = field(default_factory=dict)
    asks: list[tuple[TopicPartition, bool]] = field(default_factory=list)

    def partition_leader(
        self, topic_partition: TopicPartition, refresh: bool = False
    ) -> Location | None:
        self.asks.append((topic_partition, refresh))
        return (self.fresh if refresh else self.cached).get(topic_partition)

    def coordinator(self, coordinator_partition: int, refresh: bool = False) -> int | None:
        raise AssertionError("the checks ask partition_leader only")

    def refreshes(self) -> int:
        return sum(1 for _, refresh in self.asks if refresh)

    def both(self, topic_partition: TopicPartition, location: Location | None) -> None:
        """The cache and ZooKeeper agree."""
        self.cached[topic_partition] = location
        self.fresh[topic_partition] = location


@dataclass
class FakeRegistrations:
    """The live brokers' epochs as ZooKeeper would answer; ``reads`` counts the reads."""

    epochs: dict[int, int] = field(default_factory=dict)
    failing: bool = False
    reads: int = 0

    def __call__(self) -> dict[int, int]:
        self.reads += 1
        if self.failing:
            raise ConnectionError("ZooKeeper unreachable")
        return dict(self.epochs)


class FakeClock:
    """Stands in for the ``time`` module inside ``internal_checks``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def offsets_partition_of(group_id: str) -> TopicPartition:
    assert group_id == GROUP
    return OFFSETS


@dataclass
class Setup:
    checks: InternalCallChecks
    locator: FakeLocator
    registrations: FakeRegistrations


@pytest.fixture()
def setup() -> Setup:
    locator = FakeLocator()
    registrations = FakeRegistrations({A: 100, B: 200})
    checks = InternalCallChecks(
        locator, RegisteredEpochs(registrations, refresh_interval_s=3600), offsets_partition_of
    )
    return Setup(checks, locator, registrations)


def fetch(replica_id: int, broker_epoch: int) -> ReplicaFetch:
    return ReplicaFetch(replica_id, broker_epoch, ())


def epochs(coordinator_epoch: int, coordinator_partition: int = OWNER) -> CallEpochs:
    return CallEpochs(coordinator_partition, coordinator_epoch, leader_epoch=3)


def register() -> RegisterPartition:
    return RegisterPartition(TRANSACTION_ID, DATA, 12, 0, epochs(EPOCH))


def settle() -> SettleOffsetsHolder:
    return SettleOffsetsHolder(TRANSACTION_ID, TRANSACTION_ID + JOURNAL_PARTITIONS_MAX, GROUP, DATA)


def test_the_transaction_id_is_owned_by_the_partition_the_tests_assume() -> None:
    assert coordinator_partition_of(TRANSACTION_ID) == OWNER


# --- replica Fetch -----------------------------------------------------------------------


def test_a_fetch_in_the_callers_own_name_and_registered_epoch_is_admitted(setup: Setup) -> None:
    setup.checks.check_fetch(A, fetch(A, 100))
    setup.checks.check_fetch(A, fetch(A, 100))
    assert setup.registrations.reads == 1  # read once, then known


def test_a_fetch_in_another_brokers_name_is_refused_fatally(setup: Setup) -> None:
    with pytest.raises(
        ClusterAuthorizationError, match=f"broker {A} fetched in the name of broker {B}"
    ):
        setup.checks.check_fetch(A, fetch(B, 200))  # B's right epoch: the name alone refuses
    assert ClusterAuthorizationError.fatal
    assert setup.registrations.reads == 0  # refused before ZooKeeper is asked


@pytest.mark.parametrize("caller", [A, None], ids=["certificate", "no-certificates"])
def test_a_fetch_with_a_former_epoch_is_refused_retriably(setup: Setup, caller: int | None) -> None:
    with pytest.raises(StaleBrokerEpochError, match="ZooKeeper registers 100") as refused:
        setup.checks.check_fetch(caller, fetch(A, 99))
    assert refused.value.retriable


def test_a_fetch_by_an_unregistered_broker_is_refused(setup: Setup) -> None:
    with pytest.raises(StaleBrokerEpochError, match="no such broker"):
        setup.checks.check_fetch(C, fetch(C, 300))


def test_without_certificates_a_fetch_is_checked_on_its_epoch_only(setup: Setup) -> None:
    setup.checks.check_fetch(None, fetch(B, 200))  # admitted: nobody to hold the name against


def test_a_new_incarnation_is_admitted_once_zookeeper_shows_its_epoch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(internal_checks, "time", clock)
    registrations = FakeRegistrations({A: 100})
    checks = InternalCallChecks(
        FakeLocator(), RegisteredEpochs(registrations, refresh_interval_s=1.0), offsets_partition_of
    )
    checks.check_fetch(A, fetch(A, 100))
    registrations.epochs[A] = 150  # A restarted: a new registration
    clock.now += 1.0
    checks.check_fetch(A, fetch(A, 150))  # unknown to the cache: read again, found
    assert registrations.reads == 2
    with pytest.raises(StaleBrokerEpochError, match="ZooKeeper registers 150"):
        checks.check_fetch(A, fetch(A, 100))  # the former incarnation is out


def test_zookeeper_unreadable_refuses_an_unknown_epoch_retriably(setup: Setup) -> None:
    setup.registrations.failing = True
    with pytest.raises(StaleBrokerEpochError, match="no such broker") as refused:
        setup.checks.check_fetch(A, fetch(A, 100))
    assert refused.value.retriable


# --- RegisteredEpochs: at most one read per interval --------------------------------------


def test_registered_epochs_read_again_at_most_once_per_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(internal_checks, "time", clock)
    registrations = FakeRegistrations({A: 100})
    known = RegisteredEpochs(registrations, refresh_interval_s=1.0)

    assert known.epoch_of(A, 100) == 100
    assert registrations.reads == 1
    assert known.epoch_of(A, 100) == 100  # as expected: no read
    assert registrations.reads == 1
    for _ in range(50):  # a former incarnation fetching in a loop
        assert known.epoch_of(A, 99) == 100
    assert registrations.reads == 1  # the first read was this instant

    clock.now += 0.999
    assert known.epoch_of(A, 99) == 100
    assert registrations.reads == 1
    clock.now += 0.001
    registrations.epochs[A] = 99
    assert known.epoch_of(A, 99) == 99  # an interval later: read again, and it is there
    assert registrations.reads == 2
    assert known.epoch_of(A, 98) == 99
    assert registrations.reads == 2


def test_registered_epochs_keep_what_was_known_when_zookeeper_is_away(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(internal_checks, "time", clock)
    registrations = FakeRegistrations({A: 100})
    known = RegisteredEpochs(registrations, refresh_interval_s=1.0)
    assert known.epoch_of(A, 100) == 100
    registrations.failing = True
    clock.now += 5
    assert known.epoch_of(A, 101) == 100  # the read failed: the last answer stands
    assert registrations.reads == 2
    assert known.epoch_of(A, 101) == 100
    assert registrations.reads == 2  # and a failed read counts: no hammering either


# --- CountEntries, ApplyCommit, ApplyAbort: the coordinator's calls ------------------------


def test_the_coordinator_partitions_leader_at_its_epoch_is_admitted(setup: Setup) -> None:
    setup.locator.both(JOURNAL, Location(A, EPOCH))
    setup.checks.check_coordinator(A, TRANSACTION_ID, epochs(EPOCH))
    setup.checks.check_coordinator(A, TRANSACTION_ID, epochs(EPOCH - 1))  # at most its epoch
    assert setup.locator.asks == [(JOURNAL, False), (JOURNAL, False)]  # the cache vouched


def test_a_call_naming_a_coordinator_that_does_not_own_the_transaction_is_refused(
    setup: Setup,
) -> None:
    setup.locator.both(TopicPartition(TXN_JOURNAL_TOPIC, OWNER + 1), Location(A, EPOCH))
    with pytest.raises(ClusterAuthorizationError, match=f"coordinator {OWNER} owns it"):
        setup.checks.check_coordinator(A, TRANSACTION_ID, epochs(EPOCH, OWNER + 1))
    assert setup.locator.asks == []


def test_a_broker_that_does_not_lead_the_coordinator_partition_is_refused_retriably(
    setup: Setup,
) -> None:
    """A deposed coordinator (or one posing as it) is told to find the coordinator again:
    retriable, so a producer whose commit arrived during the move follows it."""
    setup.locator.both(JOURNAL, Location(B, EPOCH))
    with pytest.raises(NotCoordinatorError, match=f"which broker {B} leads") as raised:
        setup.checks.check_coordinator(A, TRANSACTION_ID, epochs(EPOCH))
    assert raised.value.retriable
    assert setup.locator.refreshes() == 1  # looked up once more before refusing


def test_an_honest_new_leader_is_admitted_after_one_refresh(setup: Setup) -> None:
    setup.locator.cached[JOURNAL] = Location(B, EPOCH)  # the cache still has the old leader
    setup.locator.fresh[JOURNAL] = Location(A, EPOCH + 1)
    setup.checks.check_coordinator(A, TRANSACTION_ID, epochs(EPOCH + 1))
    assert setup.locator.asks == [(JOURNAL, False), (JOURNAL, True)]


def test_an_epoch_newer_than_the_cache_is_looked_up_once_and_admitted(setup: Setup) -> None:
    setup.locator.cached[JOURNAL] = Location(A, EPOCH)
    setup.locator.fresh[JOURNAL] = Location(A, EPOCH + 1)
    setup.checks.check_coordinator(A, TRANSACTION_ID, epochs(EPOCH + 1))
    assert setup.locator.refreshes() == 1


@pytest.mark.parametrize("caller", [A, None], ids=["certificate", "no-certificates"])
def test_a_coordinator_epoch_above_zookeepers_is_refused(setup: Setup, caller: int | None) -> None:
    setup.locator.both(JOURNAL, Location(A, EPOCH))
    with pytest.raises(TransactionCoordinatorFencedError, match=f"above the {EPOCH}"):
        setup.checks.check_coordinator(caller, TRANSACTION_ID, epochs(EPOCH + 1))
    assert setup.locator.refreshes() == 1


def test_without_certificates_a_coordinator_call_at_a_known_epoch_is_admitted(
    setup: Setup,
) -> None:
    setup.locator.both(JOURNAL, Location(B, EPOCH))
    setup.checks.check_coordinator(None, TRANSACTION_ID, epochs(EPOCH))
    assert setup.locator.refreshes() == 0


@pytest.mark.parametrize("found", [None, GONE], ids=["unreadable-or-leaderless", "gone"])
def test_a_coordinator_leader_that_cannot_be_confirmed_refuses_retriably(
    setup: Setup, found: Location | None
) -> None:
    setup.locator.cached[JOURNAL] = Location(A, EPOCH)
    setup.locator.fresh[JOURNAL] = found
    with pytest.raises(NotCoordinatorError, match="could not be confirmed") as refused:
        setup.checks.check_coordinator(A, TRANSACTION_ID, epochs(EPOCH + 1))
    assert refused.value.retriable
    assert setup.locator.refreshes() == 1


# --- RegisterPartition --------------------------------------------------------------------


def test_the_partitions_leader_may_register(setup: Setup) -> None:
    setup.locator.both(DATA, Location(A, 3))
    setup.checks.check_register(A, register())
    assert setup.locator.asks == [(DATA, False)]


def test_a_broker_that_does_not_lead_the_partition_may_not_register(setup: Setup) -> None:
    setup.locator.both(DATA, Location(B, 3))
    with pytest.raises(NotLeaderOrFollowerError, match=f"which {B} leads") as refused:
        setup.checks.check_register(A, register())
    assert refused.value.retriable
    assert setup.locator.asks == [(DATA, False), (DATA, True)]


def test_a_new_leader_registers_once_the_refresh_shows_it(setup: Setup) -> None:
    setup.locator.cached[DATA] = Location(B, 3)
    setup.locator.fresh[DATA] = Location(A, 4)
    setup.checks.check_register(A, register())
    assert setup.locator.refreshes() == 1


def test_a_registration_without_a_known_leader_is_refused(setup: Setup) -> None:
    with pytest.raises(NotLeaderOrFollowerError, match="no live broker"):
        setup.checks.check_register(A, register())
    assert setup.locator.refreshes() == 1


def test_without_certificates_registration_is_not_checked(setup: Setup) -> None:
    setup.checks.check_register(None, register())
    assert setup.locator.asks == []


# --- SettleOffsetsHolder ------------------------------------------------------------------


def test_the_groups_coordinator_may_settle(setup: Setup) -> None:
    setup.locator.both(OFFSETS, Location(A, 1))
    setup.checks.check_settle(A, settle())
    assert setup.locator.asks == [(OFFSETS, False)]


def test_another_broker_may_not_settle_a_groups_offsets(setup: Setup) -> None:
    setup.locator.both(OFFSETS, Location(B, 1))
    with pytest.raises(NotCoordinatorError, match=f"group {GROUP!r}") as refused:
        setup.checks.check_settle(A, settle())
    assert refused.value.retriable
    assert setup.locator.asks == [(OFFSETS, False), (OFFSETS, True)]


def test_a_new_group_coordinator_settles_once_the_refresh_shows_it(setup: Setup) -> None:
    setup.locator.cached[OFFSETS] = Location(B, 1)
    setup.locator.fresh[OFFSETS] = Location(A, 2)
    setup.checks.check_settle(A, settle())


def test_without_certificates_settlement_is_not_checked(setup: Setup) -> None:
    setup.checks.check_settle(None, settle())
    assert setup.locator.asks == []
