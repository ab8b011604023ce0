"""Storage tiers with exact numbers on a failure-free run: the write time and stall that
the bandwidths imply (the reference model: 980 GB per checkpoint, 334 checkpoints)."""

from __future__ import annotations

import pytest

from sim.engine import build_plan, simulate_replica
from sim.model import checkpoints, perf
from sim.model.scenario import load_scenario
from tests.conftest import ROOT

NO_FAILURES = ["failures=[]"]
REFERENCE = ROOT / "scenarios/llama70b-1k.yaml"


def run(*overrides: str):
    scenario = load_scenario(REFERENCE, [*NO_FAILURES, *overrides]).base
    return scenario, simulate_replica(build_plan(scenario), 0, 1)


def tier(kind: str, *extra: str) -> list[str]:
    # replace the reference's explicit Lustre figures by the kind's preset
    return [f"storage.checkpoint_tier={{kind: {kind}}}", *extra]


@pytest.mark.parametrize(
    ("overrides", "write_s"),
    [
        (tier("nfs"), 0.002 + 980 / 5),  # a single NFS server: 5 GB/s, 2 ms
        (tier("lustre"), 0.001 + 980 / 160),  # 32 NVMe OSTs x 5 GB/s
        (tier("lustre", "storage.checkpoint_tier.osts=8"), 0.001 + 980 / 40),  # 8 OSTs
        (tier("weka"), 0.0005 + 980 / 200),
    ],
)
def test_tier_write_time_and_stall(overrides, write_s):
    scenario, r = run(*overrides)
    assert checkpoints.checkpoint_write_s(scenario) == pytest.approx(write_s)
    written = 334  # ceil(333,787 steps / 1,000)
    assert r.checkpoints_written == written
    assert r.checkpoint_stall_hours * 3600 == pytest.approx(written * write_s)
    ideal_s = perf.total_steps(scenario) * perf.step_time_s(scenario)
    assert r.wall_hours * 3600 == pytest.approx(ideal_s + written * write_s)


def test_client_paths_cap_a_fast_tier():
    # 4 nodes x 25 GB/s = 100 GB/s < a 200 GB/s Weka tier
    scenario = load_scenario(
        REFERENCE, [*NO_FAILURES, *tier("weka"), "storage.client_GB_s_per_node=0.5"]
    ).base
    assert checkpoints.checkpoint_write_s(scenario) == pytest.approx(0.0005 + 980 / 64)


def test_async_on_nfs_stalls_only_for_snapshots_while_the_drain_keeps_up():
    scenario, r = run(*tier("nfs"), "checkpoint.mode=async")
    snapshot_s = 980 / 128 / 50  # per-node state over the device-to-host copy
    drain_s = 0.002 + 980 / 5  # 196 s < the 69-minute interval: never waited for
    assert checkpoints.snapshot_s(scenario) == pytest.approx(snapshot_s)
    assert r.checkpoint_stall_hours * 3600 == pytest.approx(334 * snapshot_s + drain_s)
