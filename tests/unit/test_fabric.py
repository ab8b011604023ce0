"""The SimPy flow model of the fabric: agreement with the analytic ring on a healthy
non-blocking tree, and what degraded links, failed switches, oversubscription and
placement do to a collective."""

from __future__ import annotations

import numpy as np
import pytest

from sim import fabric, network
from sim.scenario import load_scenario
from tests.conftest import ROOT

BASE = load_scenario(ROOT / "scenarios/llama70b-1k.yaml").base


def scenario(nodes=128, oversubscription=1.0, placement="contiguous", tensor=8, pipeline=1):
    net = BASE.network.model_copy(
        update={"oversubscription": oversubscription, "placement": placement}
    )
    para = BASE.parallelism.model_copy(update={"tensor": tensor, "pipeline": pipeline})
    cluster = BASE.cluster.model_copy(update={"nodes": nodes})
    return BASE.model_copy(update={"network": net, "parallelism": para, "cluster": cluster})


@pytest.mark.parametrize("gpus", [16, 128, 1024, 4096, 16384])
def test_healthy_fabric_matches_the_analytic_ring(gpus):
    s = scenario(nodes=gpus // 8)
    simulated = fabric.simulate_collective(s, 16e9, groups="all", algorithm="ring")
    analytic = network.collective(
        "all_reduce", 16e9, network.Group(gpus // 8, 8), s.network, s.cluster.gpu_spec, 8, "ring"
    )
    assert simulated.seconds == pytest.approx(analytic.seconds, rel=0.02)


def test_reference_gradient_allreduce_matches_on_a_healthy_tree():
    simulated = fabric.simulate_collective(BASE, network.gradient_bytes_per_rank(BASE))
    assert simulated.seconds == pytest.approx(network.gradient_allreduce(BASE).seconds, rel=0.02)


def test_max_min_fair_shares():
    # two flows share link 0 (cap 10); one of them also crosses link 1 (cap 3)
    rates = fabric.max_min_rates([[0, 1], [0]], np.array([True, True]), np.array([10.0, 3.0]))
    assert rates.tolist() == [3.0, 7.0]


def test_a_halved_spine_link_slows_a_ring_that_crosses_it_and_is_named():
    s = scenario()
    healthy = fabric.simulate_collective(s, 4e9)
    halved = fabric.simulate_collective(s, 4e9, degrade={"leaf0-spine0": 0.5})
    assert (
        halved.seconds > 1.9 * healthy.seconds - healthy.seconds * 0.1
    )  # as slow as its slowest hop
    assert halved.bottlenecks[0].name == "leaf0-spine0.0"
    assert halved.bottlenecks[0].share_GB_s == pytest.approx(healthy.bottlenecks[0].share_GB_s / 2)


def test_failed_links_and_switches_reroute_over_the_survivors():
    s = scenario(placement="scattered")
    healthy = fabric.simulate_collective(s, 4e9).seconds
    failed_link = fabric.simulate_collective(
        s, 4e9, degrade={f"leaf{i}-spine{j}": 0.0 for i in range(8) for j in range(8)}
    )
    assert failed_link.seconds > healthy  # the survivors carry the rerouted flows too
    failed_spines = fabric.simulate_collective(
        s, 4e9, failed_switches={f"spine{j}" for j in range(8)}
    )
    assert failed_spines.seconds > healthy
    with pytest.raises(ValueError, match="unknown"):
        fabric.simulate_collective(s, 4e9, failed_switches={"spine999"})


def test_oversubscription_slows_crossing_traffic_not_a_ring_placed_leaf_by_leaf():
    def t(o, placement, algorithm):
        return fabric.simulate_collective(
            scenario(oversubscription=o, placement=placement), 4e9, algorithm=algorithm
        ).seconds

    assert t(3.0, "contiguous", "ring") == pytest.approx(t(1.0, "contiguous", "ring"))
    assert t(3.0, "scattered", "ring") > 1.2 * t(1.0, "scattered", "ring")
    assert t(3.0, "contiguous", "tree") > 1.2 * t(1.0, "contiguous", "tree")


def test_three_tier_routes_through_cores():
    s = scenario(nodes=512, placement="scattered")
    f, routing = fabric.build_fabric(s)
    path = fabric.route(f, routing, (0, 0), (int(np.flatnonzero(f.position == 511)[0]), 0))
    names = [f.names[i] for i in path]
    assert any("core" in n for n in names) and len(path) == 6
