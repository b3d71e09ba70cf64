"""``python -m bench.groups``: consumer group rebalances and membership overhead, measured
against a real ``twinlog serve`` process (a temporary data directory, a free loopback port,
``--metrics-port 0``; ``--heartbeat-interval-ms`` sets its ``group_heartbeat_interval_ms``).

Members are ``Consumer(server, group_id=...).subscribe([topic])``, each driven by a thread
of its own that polls every 50 ms (the consumer applies its group's changes inside poll),
except the SIGKILLed member, a separate process running this module (``--member-of``).

    form            N members (--members) subscribe to a topic of --partitions partitions,
                    from the first subscribe() until the group is settled (below)
    join            one more member: its subscribe() -> settled with N + 1 members
    leave           that member's close() -> settled with N (--rounds join/leave rounds)
    SIGKILL         N - 1 members here and one member process (all with
                    --session-timeout-ms); the process is SIGKILLed -> settled with N - 1.
                    Split into *expiry* (kill -> the coordinator has removed the member:
                    its session timeout, less the time since its last heartbeat, plus
                    the session check) and *reassign* (-> the others own everything).
                    The process says when each of its heartbeats was answered, so the
                    table shows how long after the last one it was removed. Members that
                    settled together heartbeat in step: the others have just heartbeated
                    when it expires, so reassign is about one interval here (anywhere
                    within one in a group whose members came at different times)
    heartbeats      --overhead-members members, settled, then idle (no poll, so no fetch
                    traffic; they stay members well within max_poll_interval_ms) for
                    --overhead-seconds: heartbeats the server answered per second (its
                    Prometheus twinlog_rpc_requests counter) and the server process's CPU
                    (utime + stime of /proc/PID/stat over the window), beside the same
                    server idle with no members (--idle-seconds)
    commit          the same members call consumer.commit() in a loop, each from its own
                    thread, for --commit-seconds: latency p50/p99/max, commits/s, server CPU

Before each join, leave and kill the group stays settled for 0.3 s plus a part of a
heartbeat interval that differs from round to round ((r + 1/2) / R of it): the members
heartbeat in step after a settle, and the event should not always hit the same point of
their interval. The members of this process share one gRPC connection (grpcio pools
channels to one address), so the server's long_polls_per_connection_max is raised to 32
(its long_polls_max): with the default, half of that, a 17th parked fetch is refused.

*Settled*: every member's own assignment() (what it applied in poll) is its share
(partitions / members, rounded down or up), the shares are disjoint and cover every
partition, and the coordinator (Admin.describe_group) says "stable" with that many
members, each assigned what it applied. Sampled every 10 ms; a sample costs one
DescribeGroup.

A member that stays in a stable group heartbeats every group_heartbeat_interval_ms (3 s
by default); while the group reconciles the coordinator answers 200 ms. So a join or a
leave waits for the other members' next heartbeat (up to one interval), and a SIGKILL
first for the session timeout. Every wait is bounded (--phase-timeout-s). Numbers depend
on the machine: the clients share it with the server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.cluster.server_process import ROOT, ServerProcess, environment
from bench.cluster.waiting import BenchTimeoutError, wait_for
from bench.e2e.runner import add_output_arguments, work_directory, write_json
from bench.e2e.workload import percentile

POLL_MS = 50  # each member's poll
SAMPLE_S = 0.01  # how often a settled group is looked for
METRICS = re.compile(r"metrics on (http://\S+)")
HEARTBEATS = re.compile(
    r'^twinlog_rpc_requests_total\{([^}]*method="GroupHeartbeat"[^}]*)\} (\S+)$'
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
WORKER_LIFETIME_S = 600.0  # a member process never outlives this, whatever its parent does
JOIN_TIMEOUT_S = 30.0  # a member thread's close
LONG_POLLS = 32  # the server's long_polls_max by default (a quarter of its 128 threads)
SETTLE_S = 0.3  # after a group settled, every member has had its stable interval by then


@dataclass(frozen=True)
class Settings:
    members: int = 4
    partitions: int = 16
    rounds: int = 3
    kill_rounds: int = 2
    session_timeout_ms: int = 6_000
    heartbeat_interval_ms: int | None = None  # None: the server's default
    overhead_members: int = 16
    idle_seconds: float = 3.0
    overhead_seconds: float = 10.0
    commit_seconds: float = 5.0
    phase_timeout_s: float = 60.0


# --- members ----------------------------------------------------------------------------------


class MemberThread:
    """One subscribed Consumer, used only by its own thread (the consumer's thread rule):
    it polls (``poll`` mode), stays idle, or commits in a loop, until ``stop``, then closes
    the consumer. The other threads read ``assigned`` and the times it records."""

    def __init__(self, address: str, group: str, topic: str, **settings: Any) -> None:
        self.address, self.group, self.topic = address, group, topic
        self.settings = settings
        self.mode = "poll"
        self.assigned: frozenset[tuple[str, int]] = frozenset()
        self.subscribed_s = math.nan  # monotonic, just before subscribe()
        self.close_started_s = math.nan
        self.close_ended_s = math.nan
        self.commit_until_s = 0.0
        self.commit_latencies_s: list[float] = []
        self.committing = threading.Event()  # set while in a commit loop
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{group}", daemon=True)

    def start(self) -> MemberThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        from twinlog.rpc.client import Consumer

        try:
            consumer = Consumer(self.address, group_id=self.group, **self.settings)
        except BaseException as error:
            self.error = error
            return
        try:
            self.subscribed_s = time.monotonic()
            consumer.subscribe([self.topic])
            while not self._stop.is_set():
                if self.mode == "poll":
                    consumer.poll(timeout_ms=POLL_MS)
                    self.assigned = frozenset(consumer.assignment())
                elif self.mode == "commit":
                    self._commit_loop(consumer)
                else:
                    self._stop.wait(POLL_MS / 1000)
        except BaseException as error:
            self.error = error
        finally:
            self.close_started_s = time.monotonic()
            try:
                consumer.close()
            except BaseException as error:
                self.error = self.error or error
            self.close_ended_s = time.monotonic()

    def _commit_loop(self, consumer: Any) -> None:
        self.committing.set()
        try:
            for topic_partition in consumer.assignment():
                consumer.position(topic_partition)  # commit() commits the positions
            while time.monotonic() < self.commit_until_s and not self._stop.is_set():
                started_s = time.perf_counter()
                consumer.commit()
                self.commit_latencies_s.append(time.perf_counter() - started_s)
        finally:
            self.mode = "idle"
            self.committing.clear()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout_s: float = JOIN_TIMEOUT_S) -> None:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise BenchTimeoutError(f"a member of {self.group!r} did not close in {timeout_s} s")

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"a member of {self.group!r} failed: {self.error!r}")


class MemberProcess:
    """One subscribed Consumer in a process of its own (``--member-of``), which says its
    assignment on stdout whenever it changes; SIGKILLed by the benchmark."""

    def __init__(
        self,
        address: str,
        group: str,
        topic: str,
        client_id: str,
        session_timeout_ms: int,
        log: Path,
    ) -> None:
        self.client_id = client_id
        self.assigned: frozenset[tuple[str, int]] = frozenset()
        self.last_beat_s = math.nan  # monotonic: its last answered heartbeat
        self.log = log
        with log.open("ab") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bench.groups", "--member-of", group, "--server", address,
                 "--topic", topic, "--client-id", client_id,
                 "--session-timeout-ms", str(session_timeout_ms)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True,
                cwd=ROOT, env=environment(),
            )  # fmt: skip
        self._reader = threading.Thread(target=self._read, name="member-process", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            for line in stdout:
                if line.startswith("assigned "):
                    pairs = json.loads(line[len("assigned ") :])
                    self.assigned = frozenset((topic, partition) for topic, partition in pairs)
                elif line.startswith("beat "):
                    self.last_beat_s = float(line.split()[1])
        finally:
            stdout.close()  # by its reader, once the process is gone: never under its feet

    def check(self) -> None:
        if self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the member process exited ({self.process.returncode}):\n{tail}")

    def kill(self) -> float:
        """SIGKILL; the monotonic time just before it."""
        killed_s = time.monotonic()
        self.process.kill()
        self._reap()
        return killed_s

    def end(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self._reap()

    def _reap(self) -> None:
        """Wait for the process and for its reader, which closes the stdout pipe."""
        self.process.wait(timeout=JOIN_TIMEOUT_S)
        self._reader.join(timeout=JOIN_TIMEOUT_S)


def member_process_main(args: argparse.Namespace) -> int:
    """The SIGKILLed member: subscribe and poll until killed (or orphaned, or too old); say
    each answered heartbeat's time ("beat", time.monotonic(): one clock for every process)
    and each new assignment."""
    from twinlog.rpc.client import Consumer
    from twinlog.rpc.client.remote import RemoteBroker

    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    class SaysHeartbeats(RemoteBroker):
        def group_heartbeat(self, call: Any) -> Any:
            answer = super().group_heartbeat(call)
            say(f"beat {time.monotonic():.6f}")
            return answer

    parent = os.getppid()
    ends_s = time.monotonic() + WORKER_LIFETIME_S
    broker = SaysHeartbeats(args.server)
    consumer = Consumer(
        broker,
        group_id=args.member_of,
        client_id=args.client_id,
        session_timeout_ms=args.session_timeout_ms,
    )
    consumer.subscribe([args.topic])
    said: list[Any] | None = None
    while os.getppid() == parent and time.monotonic() < ends_s:
        consumer.poll(timeout_ms=POLL_MS)
        assigned = sorted([tp.topic, tp.partition] for tp in consumer.assignment())
        if assigned != said:
            say("assigned " + json.dumps(assigned))
            said = assigned
    consumer.close()
    broker.close()
    return 0


Member = MemberThread | MemberProcess


# --- the group, as the members and the coordinator see it -------------------------------------


@dataclass
class Probe:
    """Looks at one group: is it settled (module docstring) with these members?"""

    admin: Any
    group: str
    topic: str
    partitions: int

    def every_partition(self) -> set[tuple[str, int]]:
        return {(self.topic, index) for index in range(self.partitions)}

    def members_settled(self, members: Sequence[Member]) -> bool:
        """The members' own view: balanced, disjoint shares covering every partition."""
        low, high = self.partitions // len(members), -(-self.partitions // len(members))
        union: set[tuple[str, int]] = set()
        for member in members:
            member.check()
            owned = member.assigned
            if not low <= len(owned) <= high or union & owned:
                return False
            union |= owned
        return union == self.every_partition()

    def coordinator_settled(self, members: Sequence[Member]) -> bool:
        description = self.admin.describe_group(self.group)
        if description.state != "stable" or len(description.members) != len(members):
            return False
        theirs = sorted(sorted(tuple(tp) for tp in m.assigned) for m in description.members)
        ours = sorted(sorted(m.assigned) for m in members)
        revoking = any(m.revoking for m in description.members)
        return theirs == ours and not revoking

    def settled(self, members: Sequence[Member]) -> bool:
        return self.members_settled(members) and self.coordinator_settled(members)

    def wait_settled(self, members: Sequence[Member], what: str, timeout_s: float) -> float:
        """The monotonic time at which the group was first seen settled."""
        deadline_s = time.monotonic() + timeout_s
        while not self.settled(members):
            if time.monotonic() >= deadline_s:
                description = self.admin.describe_group(self.group)
                raise BenchTimeoutError(
                    f"{what}: group {self.group!r} not settled with {len(members)} members "
                    f"after {timeout_s:.0f} s; members see "
                    f"{[len(m.assigned) for m in members]} partitions, the coordinator "
                    f"says {description.state}, epoch {description.group_epoch}, "
                    f"{len(description.members)} members"
                )
            time.sleep(SAMPLE_S)
        return time.monotonic()


def owners(members: Iterable[Member]) -> dict[tuple[str, int], int]:
    return {tp: index for index, member in enumerate(members) for tp in member.assigned}


def moved(before: dict[tuple[str, int], int], after: dict[tuple[str, int], int]) -> int:
    """Partitions whose owner changed (members keep their index; a new one is appended)."""
    return sum(1 for tp, owner in after.items() if before.get(tp) != owner)


def stop_all(members: Iterable[MemberThread]) -> None:
    members = list(members)
    for member in members:
        member.stop()
    for member in members:
        member.join()


# --- the server ---------------------------------------------------------------------------------


@dataclass
class Server:
    process: ServerProcess
    metrics_url: str

    @property
    def address(self) -> str:
        return self.process.address

    def cpu_s(self) -> float:
        """The server process's user + system CPU time so far."""
        assert self.process.process is not None
        stat = Path(f"/proc/{self.process.process.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state is fields[0]
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def heartbeats(self) -> float:
        """GroupHeartbeat calls the server answered so far (any status)."""
        with urllib.request.urlopen(self.metrics_url, timeout=10) as answer:
            text = answer.read().decode()
        return sum(float(m.group(2)) for m in map(HEARTBEATS.match, text.splitlines()) if m)


@contextlib.contextmanager
def running_server(directory: Path, heartbeat_interval_ms: int | None) -> Any:
    # The members of this process share one connection (grpcio pools the channels to one
    # address): let all the server's long polls be parked on it, or the 17th parked fetch
    # is refused (the consumer backs off and warns; the figures are not about fetching).
    arguments = ["--metrics-port", "0", "--config", f"long_polls_per_connection_max={LONG_POLLS}"]
    if heartbeat_interval_ms is not None:
        arguments += ["--config", f"group_heartbeat_interval_ms={heartbeat_interval_ms}"]
    process = ServerProcess("server", directory / "data", arguments).start()
    try:
        url = wait_for(
            "the server's metrics endpoint",
            lambda: METRICS.search(process.log_path.read_text(errors="replace")),
            30.0,
        ).group(1)
        yield Server(process, url)
    finally:
        try:
            process.terminate()
        finally:
            process.kill_group()


@dataclass
class Window:
    """Server CPU and heartbeats over a stretch of time."""

    seconds: float
    cpu_percent: float
    heartbeats: float

    @property
    def heartbeats_per_s(self) -> float:
        return self.heartbeats / self.seconds


def measure_window(
    server: Server, seconds: float, during: Callable[[], None] | None = None
) -> Window:
    """``during()`` (which must last about ``seconds``), or a sleep of ``seconds``."""
    beats, cpu, started_s = server.heartbeats(), server.cpu_s(), time.monotonic()
    if during is None:
        time.sleep(seconds)
    else:
        during()
    elapsed_s = time.monotonic() - started_s
    cpu_used_s = server.cpu_s() - cpu
    return Window(elapsed_s, 100 * cpu_used_s / elapsed_s, server.heartbeats() - beats)


def whole_intervals(seconds: float, interval_ms: int) -> float:
    """``seconds`` rounded up to whole heartbeat intervals: members that settled together
    heartbeat in step, and a window of 10 s at 3 s would count 3 or 4 beats of each."""
    interval_s = interval_ms / 1000
    return math.ceil(seconds / interval_s - 1e-9) * interval_s


# --- the phases ---------------------------------------------------------------------------------


@dataclass
class Results:
    settings: dict[str, Any]
    heartbeat_interval_ms: int
    form_s: float = math.nan
    join_s: list[float] = field(default_factory=list)
    join_moved: list[int] = field(default_factory=list)
    join_epochs: list[int] = field(default_factory=list)  # group epochs the join took
    leave_s: list[float] = field(default_factory=list)
    leave_close_s: list[float] = field(default_factory=list)  # close() itself
    kills: list[dict[str, float]] = field(default_factory=list)
    overhead: dict[str, Any] = field(default_factory=dict)
    server_log: str = ""


def pause(results: Results, round_number: int, rounds: int) -> None:
    """Before a join, a leave or a kill: the group stays settled for a while, and round r of
    R starts (r + 1/2) / R of a heartbeat interval later (after SETTLE_S). The members
    heartbeat in step after a settle, so a fixed pause would always hit the same point of
    their interval; spread over it, the median is that of an event at a random moment."""
    interval_s = results.heartbeat_interval_ms / 1000
    time.sleep(SETTLE_S + interval_s * (round_number + 0.5) / rounds)


def join_and_leave(
    server: Server, admin: Any, settings: Settings, results: Results, say: Any
) -> None:
    group, topic = "bench-rebalance", "rebalance"
    admin.create_topic(topic, partitions=settings.partitions)
    probe = Probe(admin, group, topic, settings.partitions)
    timeout_s = settings.phase_timeout_s
    say(f"forming a group of {settings.members} ...")
    members = [MemberThread(server.address, group, topic) for _ in range(settings.members)]
    try:
        for member in members:
            member.start()
        settled_s = probe.wait_settled(members, "forming", timeout_s)
        results.form_s = settled_s - min(m.subscribed_s for m in members)
        for round_number in range(settings.rounds):
            say(f"join and leave, round {round_number + 1} of {settings.rounds} ...")
            pause(results, round_number, settings.rounds)
            before = owners(members)
            epoch_before = admin.describe_group(group).group_epoch
            joiner = MemberThread(server.address, group, topic).start()
            members.append(joiner)
            settled_s = probe.wait_settled(members, "join", timeout_s)  # it has subscribed
            results.join_s.append(settled_s - joiner.subscribed_s)
            results.join_moved.append(moved(before, owners(members)))
            results.join_epochs.append(admin.describe_group(group).group_epoch - epoch_before)
            members.remove(joiner)
            pause(results, round_number, settings.rounds)
            joiner.stop()
            settled_s = probe.wait_settled(members, "leave", timeout_s)
            joiner.join()  # its close_started_s is set
            joiner.check()
            results.leave_s.append(settled_s - joiner.close_started_s)
            results.leave_close_s.append(joiner.close_ended_s - joiner.close_started_s)
    finally:
        stop_all(members)
    for member in members:
        member.check()


def sigkill(
    server: Server, admin: Any, settings: Settings, results: Results, directory: Path, say: Any
) -> None:
    group, topic = "bench-kill", "kill"
    admin.create_topic(topic, partitions=settings.partitions)
    probe = Probe(admin, group, topic, settings.partitions)
    timeout_s = settings.phase_timeout_s + settings.session_timeout_ms / 1000
    session = {"session_timeout_ms": settings.session_timeout_ms}
    stayers = [
        MemberThread(server.address, group, topic, **session) for _ in range(settings.members - 1)
    ]
    process: MemberProcess | None = None
    try:
        for member in stayers:
            member.start()
        for round_number in range(settings.kill_rounds):
            say(
                f"SIGKILL, round {round_number + 1} of {settings.kill_rounds}: starting the member process ..."
            )
            client_id = f"bench-killed-{round_number}"
            process = MemberProcess(
                server.address, group, topic, client_id, settings.session_timeout_ms,
                directory / f"member-{round_number}.log",
            )  # fmt: skip
            probe.wait_settled([*stayers, process], "the member process joining", timeout_s)
            pause(results, round_number, settings.kill_rounds)
            say(f"SIGKILL, round {round_number + 1}: killed; waiting for its session to expire ...")
            killed_s = process.kill()
            last_beat_s = process.last_beat_s
            expired_s = math.nan
            deadline_s = killed_s + timeout_s
            while True:
                if math.isnan(expired_s):
                    names = {m.client_id for m in admin.describe_group(group).members}
                    if client_id not in names:
                        expired_s = time.monotonic()
                if not math.isnan(expired_s) and probe.settled(stayers):
                    settled_s = time.monotonic()
                    break
                if time.monotonic() >= deadline_s:
                    raise BenchTimeoutError(
                        f"the others did not take the killed member's partitions in {timeout_s:.0f} s"
                    )
                time.sleep(SAMPLE_S)
            process = None
            results.kills.append(
                {
                    "total_s": settled_s - killed_s,
                    "expiry_s": expired_s - killed_s,
                    "reassign_s": settled_s - expired_s,
                    "beat_before_kill_s": killed_s - last_beat_s,
                    "removed_after_beat_s": expired_s - last_beat_s,
                }
            )
    finally:
        if process is not None:
            process.end()
        stop_all(stayers)
    for member in stayers:
        member.check()


def overhead(server: Server, admin: Any, settings: Settings, results: Results, say: Any) -> None:
    group, topic = "bench-overhead", "overhead"
    count = settings.overhead_members
    interval_ms = results.heartbeat_interval_ms
    admin.create_topic(topic, partitions=settings.partitions)
    probe = Probe(admin, group, topic, settings.partitions)
    say(f"server idle, no members, {settings.idle_seconds:g} s ...")
    idle = measure_window(server, settings.idle_seconds)
    say(f"forming a group of {count} ...")
    members = [MemberThread(server.address, group, topic) for _ in range(count)]
    try:
        for member in members:
            member.start()
        settled_s = probe.wait_settled(members, "forming the big group", settings.phase_timeout_s)
        form_s = settled_s - min(m.subscribed_s for m in members)
        for member in members:
            member.mode = "idle"
        time.sleep(1.0 + POLL_MS / 1000)  # the last fetches' long polls (500 ms) end
        say(f"{count} idle members heartbeating, {settings.overhead_seconds:g} s ...")
        stable = measure_window(server, whole_intervals(settings.overhead_seconds, interval_ms))
        if not probe.settled(members):
            raise RuntimeError("the group changed while its members were idle")
        say(f"{count} members committing in a loop, {settings.commit_seconds:g} s ...")

        def commit_loops() -> None:
            until_s = time.monotonic() + settings.commit_seconds
            for member in members:
                member.commit_until_s = until_s
                member.mode = "commit"
            deadline_s = until_s + settings.phase_timeout_s
            while any(m.mode == "commit" for m in members):
                for member in members:
                    member.check()
                if time.monotonic() > deadline_s:
                    raise BenchTimeoutError("the commit loops did not end")
                time.sleep(SAMPLE_S)

        committing = measure_window(server, settings.commit_seconds, commit_loops)
    finally:
        say("closing the members ...")
        stop_all(members)
    for member in members:
        member.check()
    latencies = [s for m in members for s in m.commit_latencies_s]
    results.overhead = {
        "members": count,
        "form_s": form_s,
        "idle": asdict(idle),
        "stable": asdict(stable),
        "heartbeats_per_s": stable.heartbeats_per_s,
        "expected_heartbeats_per_s": count * 1000 / interval_ms,
        "commits": len(latencies),
        "commits_per_s": len(latencies) / committing.seconds,
        "commit_p50_ms": percentile(latencies, 0.5) * 1000,
        "commit_p99_ms": percentile(latencies, 0.99) * 1000,
        "commit_max_ms": max(latencies, default=math.nan) * 1000,
        "committing": asdict(committing),
        "members_that_committed": sum(1 for m in members if m.commit_latencies_s),
    }


def run(settings: Settings, directory: Path, say: Callable[[str], None]) -> dict[str, Any]:
    from twinlog.engine.broker.config import BrokerConfig
    from twinlog.rpc.client import Admin

    interval_ms = settings.heartbeat_interval_ms or BrokerConfig().group_heartbeat_interval_ms
    results = Results(asdict(settings), interval_ms)
    say("starting the server ...")
    with running_server(directory, settings.heartbeat_interval_ms) as server:
        results.server_log = str(server.process.log_path)
        with Admin(server.address) as admin:
            join_and_leave(server, admin, settings, results, say)
            if settings.kill_rounds:
                sigkill(server, admin, settings, results, directory, say)
            overhead(server, admin, settings, results, say)
    return asdict(results)


# --- the report ---------------------------------------------------------------------------------


def spread(values: Sequence[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:6.2f} s"
    return (
        f"{statistics.median(values):6.2f} s  (min {min(values):.2f}, max {max(values):.2f}, "
        f"{len(values)} rounds)"
    )


def listed(rows: Sequence[dict[str, float]], key: str) -> str:
    return ", ".join(f"{row[key]:.2f}" for row in rows)


def print_table(results: dict[str, Any]) -> None:
    settings = results["settings"]
    n, interval_ms = settings["members"], results["heartbeat_interval_ms"]
    overhead_ = results["overhead"]
    kills = results["kills"]
    rows = [
        ("settings", f"{settings['partitions']} partitions, heartbeat interval {interval_ms} ms "
                     f"(200 ms while reconciling), session timeout "
                     f"{settings['session_timeout_ms']} ms for the killed member"),
        (f"form ({n} members)", f"{results['form_s']:6.2f} s  (first subscribe() -> settled)"),
        (f"join ({n} -> {n + 1})", spread(results["join_s"])),
        ("", f"partitions moved {results['join_moved']}, group epochs "
             f"{results['join_epochs']} (subscribe() -> settled)"),
        (f"leave ({n + 1} -> {n})", spread(results["leave_s"])),
        ("", "close() -> settled; close() itself took "
             + ", ".join(f"{s * 1000:.0f}" for s in results["leave_close_s"]) + " ms"),
    ]  # fmt: skip
    if kills:
        rows += [
            (f"SIGKILL ({n} -> {n - 1})", spread([k["total_s"] for k in kills])),
            ("", "expiry (kill -> removed) " + listed(kills, "expiry_s") + " s + reassign "
                 + listed(kills, "reassign_s") + " s"),
            ("", f"session timeout {settings['session_timeout_ms']} ms: removed "
                 + listed(kills, "removed_after_beat_s") + " s after its last heartbeat, "
                 "which came " + listed(kills, "beat_before_kill_s") + " s before the kill"),
        ]  # fmt: skip
    idle, stable, committing = overhead_["idle"], overhead_["stable"], overhead_["committing"]
    members = overhead_["members"]
    rows += [
        (f"form ({members} members)", f"{overhead_['form_s']:6.2f} s"),
        ("heartbeats", f"{overhead_['heartbeats_per_s']:6.2f}/s answered "
                       f"(expected {overhead_['expected_heartbeats_per_s']:.2f}/s) over "
                       f"{stable['seconds']:.1f} s, {members} idle members"),
        ("server CPU", f"{stable['cpu_percent']:6.2f} % with them, {idle['cpu_percent']:.2f} % "
                       f"with no members ({idle['seconds']:.1f} s)"),
        ("commit()", f"p50 {overhead_['commit_p50_ms']:.1f} ms   p99 "
                     f"{overhead_['commit_p99_ms']:.1f} ms   max {overhead_['commit_max_ms']:.1f} ms"),
        ("", f"{overhead_['commits']:,} commits by {overhead_['members_that_committed']} members "
             f"in {committing['seconds']:.1f} s ({overhead_['commits_per_s']:,.0f}/s), "
             f"server CPU {committing['cpu_percent']:.0f} %"),
    ]  # fmt: skip
    print()
    for name, value in rows:
        print(f"{name:<20}{value}")


EXAMPLE = """
example:
  python -m bench.groups
  python -m bench.groups --heartbeat-interval-ms 1000 --rounds 5 --json groups.json
  python -m bench.groups --members 8 --partitions 32 --kill-rounds 0
  python -m bench.groups --session-timeout-ms 10000 --kill-rounds 3 --work-dir /tmp/groups
"""


def main(argv: Sequence[str] | None = None) -> int:
    defaults = Settings()
    parser = argparse.ArgumentParser(
        prog="python -m bench.groups",
        description=__doc__,
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    number = parser.add_argument
    number("--members", type=int, default=defaults.members, help="members of the stable group (4)")
    number(
        "--partitions", type=int, default=defaults.partitions, help="partitions of each topic (16)"
    )
    number("--rounds", type=int, default=defaults.rounds, help="join/leave rounds (3)")
    number(
        "--kill-rounds", type=int, default=defaults.kill_rounds, help="SIGKILL rounds (2; 0: none)"
    )
    number(
        "--session-timeout-ms", type=int, default=defaults.session_timeout_ms,
        help="session timeout of the SIGKILL phase's members (6000; the server takes 1000..300000)",
    )  # fmt: skip
    number(
        "--heartbeat-interval-ms", type=int, default=None,
        help="the server's group_heartbeat_interval_ms (default: the server's, 3000)",
    )  # fmt: skip
    number(
        "--overhead-members", type=int, default=defaults.overhead_members,
        help="members of the heartbeat and commit group (16)",
    )  # fmt: skip
    number(
        "--idle-seconds", type=float, default=defaults.idle_seconds, help="idle server window (3)"
    )
    number(
        "--overhead-seconds", type=float, default=defaults.overhead_seconds,
        help="heartbeat window (10; rounded up to whole heartbeat intervals)",
    )  # fmt: skip
    number("--commit-seconds", type=float, default=defaults.commit_seconds, help="commit loop (5)")
    number(
        "--phase-timeout-s", type=float, default=defaults.phase_timeout_s,
        help="the longest any wait may take (60; the SIGKILL phase adds the session timeout)",
    )  # fmt: skip
    add_output_arguments(parser, "no progress lines on stderr")
    # The SIGKILLed member process runs this module too:
    parser.add_argument("--member-of", help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--client-id", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.member_of is not None:
        return member_process_main(args)
    if min(args.members, args.partitions, args.overhead_members) < 2:
        parser.error("--members, --partitions and --overhead-members must be 2 or more")
    if min(args.rounds, args.kill_rounds) < 0:
        parser.error("--rounds and --kill-rounds must not be negative")
    if (
        min(args.idle_seconds, args.overhead_seconds, args.commit_seconds, args.phase_timeout_s)
        <= 0
    ):
        parser.error("the --*-seconds and --phase-timeout-s must be positive")
    if args.heartbeat_interval_ms is not None and args.heartbeat_interval_ms <= 0:
        parser.error("--heartbeat-interval-ms must be positive")
    if not 1_000 <= args.session_timeout_ms <= 300_000:
        parser.error("--session-timeout-ms must be within 1000..300000 (the server's bounds)")
    settings = Settings(
        members=args.members,
        partitions=args.partitions,
        rounds=args.rounds,
        kill_rounds=args.kill_rounds,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        overhead_members=args.overhead_members,
        idle_seconds=args.idle_seconds,
        overhead_seconds=args.overhead_seconds,
        commit_seconds=args.commit_seconds,
        phase_timeout_s=args.phase_timeout_s,
    )

    def say(text: str) -> None:
        if not args.quiet:
            print(f"groups: {text}", file=sys.stderr, flush=True)

    started_s = time.monotonic()
    with work_directory(args.work_dir, "twinlog-groups-") as directory:
        results = run(settings, directory, say)
    results["run_s"] = time.monotonic() - started_s
    print_table(results)
    write_json(results, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
