"""Preferred leaders on real processes: a leader killed and restarted comes back as a
follower; ``twinlog cluster elect-leaders --preferred`` moves the leadership back to it
under load, nothing acknowledged is lost, and the write pause it causes is measured."""

from __future__ import annotations

import itertools
import json
import time

import pytest
from cluster_checks import check_history, check_replicas_agree
from cluster_faults import FaultCluster, wait_until
from cluster_workload import AckedProducer, BackgroundProducer, TailingConsumer
from server_process import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.crash]


def _elect(cluster: FaultCluster, topic: str) -> list[dict[str, object]]:
    arguments = ["cluster", "elect-leaders", "--preferred", "--topic", topic]
    arguments += ["--server", cluster.bootstrap, "--format", "json"]
    token = cluster.token()
    if token is not None:
        arguments += ["--token", token]
    done = run_cli(*arguments)
    assert done.returncode == 0, done.stdout + done.stderr
    results: list[dict[str, object]] = json.loads(done.stdout)
    return results


def test_a_restarted_preferred_leader_is_given_its_partition_back_on_demand(
    cluster: FaultCluster, topic: str
) -> None:
    state = cluster.create_topic(topic)
    preferred = state.replicas[0]
    assert state.leader == preferred  # a new partition is led by its first replica
    producer = AckedProducer(cluster, topic, "pl")
    with TailingConsumer(cluster, topic) as consumer, BackgroundProducer(producer) as background:
        wait_until(lambda: background.acknowledged_count() >= 10, "10 acknowledged writes")
        cluster.brokers[preferred].kill()
        moved = cluster.wait_state(topic, lambda s: s.leader not in (preferred, -1), "a new leader")
        cluster.restart(preferred)
        back = cluster.wait_state(
            topic, lambda s: preferred in s.isr_ids, "the preferred leader in sync again"
        )
        assert back.leader == moved.leader  # it came back as a follower
        acknowledged = background.acknowledged_count()
        wait_until(lambda: background.acknowledged_count() >= acknowledged + 10, "writes go on")
        asked_at = time.monotonic()
        (result,) = _elect(cluster, topic)
        answered_at = time.monotonic()
        assert (result["outcome"], result["leader"], result["preferred"]) == (
            "elected",
            preferred,
            preferred,
        ), result
        after = cluster.wait_state(topic, lambda s: s.leader == preferred, "led by it again")
        assert after.leader_epoch > back.leader_epoch
        acknowledged = background.acknowledged_count()
        wait_until(lambda: background.acknowledged_count() >= acknowledged + 10, "writes go on")
        (again,) = _elect(cluster, topic)
        assert again["outcome"] == "not needed", again
    # The longest wait between two acknowledgements while the leadership moved.
    moments = [t for t in producer.acknowledged_at if asked_at - 5 <= t]
    pause_s = max(b - a for a, b in itertools.pairwise(moments))
    print(
        f"preferred leader election: answered in {answered_at - asked_at:.2f} s; the longest "
        f"write pause around it {pause_s * 1000:.0f} ms"
    )
    check_history(check_replicas_agree(cluster, topic), [producer], [consumer])
