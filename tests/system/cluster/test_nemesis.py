"""A short randomized nemesis run over the shared, secured cluster (``cluster_nemesis``): 16
faults (every kind at least once, the first nine in a random order, forged internal calls
among them) against transactional and plain producers acting as principals of their own,
then every anomaly class checked. The seed is printed (``TWINLOG_NEMESIS_SEED`` repeats a run);
``TWINLOG_NEMESIS_MINUTES=N`` runs for N minutes instead (by hand: docs/testing-cluster.md)."""

from __future__ import annotations

import os
import uuid

import pytest
from cluster_attack import EXPECTED
from cluster_faults import FaultCluster
from cluster_nemesis import (
    FAULTS_VARIABLE,
    KINDS,
    MINUTES_VARIABLE,
    Nemesis,
    seed_from_environment,
)

from twinlog.rpc.cli.local_zookeeper import LocalZooKeeper

pytestmark = [pytest.mark.slow, pytest.mark.crash]

# Every kind once in a random order (12): about a minute of CI's 35 (16 took 80 s, 30
# took 3 min); the long runs are by hand (TWINLOG_NEMESIS_FAULTS, TWINLOG_NEMESIS_MINUTES).
CI_FAULTS = 12


def test_nemesis(cluster: FaultCluster, zookeeper: LocalZooKeeper) -> None:
    seed = seed_from_environment()
    print(f"nemesis seed {seed}")
    minutes = os.environ.get(MINUTES_VARIABLE)
    nemesis = Nemesis(cluster, seed, f"nemesis-{uuid.uuid4().hex[:8]}", zookeeper)
    summary = nemesis.run(
        faults=int(os.environ.get(FAULTS_VARIABLE, str(CI_FAULTS))),
        minutes=float(minutes) if minutes else None,
    )
    print(summary.render())
    assert not summary.anomalies_found(), summary.render()
    assert set(summary.faults) == set(KINDS), summary.render()  # every kind ran
    # The forge faults did reach every door: each (door, caller) refused with its status.
    assert summary.forgeries is not None, "the shared cluster is secured"
    refused_at = {key.split(":")[0] for key in summary.forgeries.refused}
    assert refused_at == {f"{door} {caller}" for door, caller in EXPECTED}, summary.render()
