"""The SimPy flow model of the fabric: agreement with the analytic ring on a healthy
non-blocking tree, and what degraded links, failed switches, oversubscription and
placement do to a collective."""

from __future__ import annotations

import math
import signal
from contextlib import contextmanager

import numpy as np
import pytest

from sim.model import fabric, network
from sim.model.scenario import load_scenario
from tests.conftest import ROOT

BASE = load_scenario(ROOT / "scenarios/llama70b-1k.yaml").base


def scenario(
    nodes=128,
    oversubscription=1.0,
    placement="contiguous",
    tensor=8,
    pipeline=1,
    routing="static",
):
    """The reference job on `nodes` nodes; static routing unless asked (the tests of
    destination-mod-k routes and their reroutes; the adaptive ones say so)."""
    net = BASE.network.model_copy(
        update={"oversubscription": oversubscription, "placement": placement, "routing": routing}
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
        s, 4e9, failed_switches={f"leaf{i}-spine{j}" for i in range(8) for j in range(8)}
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


@contextmanager
def deadline(seconds: int):
    """Fail instead of hanging: the fair-share loop must end on any input."""

    def expire(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
def test_max_min_refuses_capacities_it_cannot_share(bad):
    with deadline(5), pytest.raises(ValueError, match="capacit"):
        fabric.max_min_rates([[0, 1], [0]], np.array([True, True]), np.array([10.0, bad]))


def test_max_min_is_max_min_fair_and_ends_on_random_inputs():
    rng = np.random.default_rng(7)
    for _ in range(200):
        links, flows = int(rng.integers(1, 8)), int(rng.integers(1, 12))
        paths = [
            sorted(rng.choice(links, int(rng.integers(1, links + 1)), replace=False).tolist())
            for _ in range(flows)
        ]
        capacity = rng.choice([0.5, 1.0, 1.0, 3.0, 1e-9, 1e9], links)
        active = rng.random(flows) < 0.8
        with deadline(5):
            rates = fabric.max_min_rates(paths, active, capacity)
        assert np.all(rates[~active] == 0) and np.all(rates[active] > 0)
        load = np.zeros(links)
        for f, path in enumerate(paths):
            load[path] += rates[f]
        assert np.all(load <= capacity * (1 + 1e-9))
        for f in np.flatnonzero(active):  # each flow has a full link on which it is the largest
            assert any(
                load[k] >= capacity[k] * (1 - 1e-9)
                and rates[f] >= max(rates[g] for g in range(flows) if k in paths[g]) * (1 - 1e-9)
                for k in paths[f]
            )


@pytest.mark.parametrize("factor", [math.nan, math.inf, -1.0, 0.0, -0.0, 1.5])
def test_degrade_factors_outside_0_1_are_refused(factor):
    with deadline(30), pytest.raises(ValueError, match=r"\(0, 1\].*--fail-switch"):
        fabric.simulate_collective(scenario(), 4e9, degrade={"leaf0-spine0": factor})


def test_unknown_links_and_switches_are_refused_with_examples():
    with pytest.raises(ValueError, match=r"'nosuch-link'.*node0\.rail0.*leaf0-spine0"):
        fabric.build_fabric(scenario(), degrade={"nosuch-link": 0.5})
    with pytest.raises(ValueError, match=r"'nosuch'.*spine0"):
        fabric.build_fabric(scenario(), failed_switches={"nosuch"})
    with pytest.raises(ValueError, match="leaf3"):
        fabric.build_fabric(scenario(), failed_switches={"leaf3"})
    with pytest.raises(ValueError, match=r"node0\.rail0"):
        fabric.build_fabric(scenario(), failed_switches={"node0.rail0"})


def test_a_failed_cable_is_skipped_by_routing():
    s = scenario()

    def cables(**what_if):
        laid = fabric.traffic(s, 4e9, **what_if)
        names = {laid.fabric.names[i] for path in laid.phases[0].paths for i in path}
        return {n for n in names if "-" in n}  # the inter-switch cables the ring uses

    f, routing = fabric.build_fabric(s, failed_switches={"leaf0-spine0.0"})
    assert f.capacity_GB_s[f.id("leaf0-spine0.0", "up")] == 0
    assert f.capacity_GB_s[f.id("leaf0-spine0.1", "up")] > 0  # its parallel cable survives
    assert "leaf0-spine0.0" in cables()
    assert not {
        c for c in cables(failed_switches={"leaf0-spine0"}) if c.startswith("leaf0-spine0.")
    }
    assert "leaf0-spine0.0" not in cables(failed_switches={"leaf0-spine0.0"})


def test_a_partitioned_fabric_is_reported_as_such():
    s = scenario(placement="scattered")
    with deadline(30), pytest.raises(fabric.FabricPartitioned) as caught:
        fabric.simulate_collective(s, 4e9, failed_switches={f"spine{j}" for j in range(16)})
    assert isinstance(caught.value, ValueError)  # bad what-if input, not an internal error
    message = str(caught.value)
    assert "partitions the fabric" in message and "cannot reach" in message
    assert "spine0..spine15" in message


def test_link_loads_show_the_rate_each_flow_gets():
    s = scenario()
    line = fabric.simulate_collective(s, 4e9).bottlenecks[0].share_GB_s
    halved = fabric.simulate_collective(s, 4e9, degrade={"leaf0-spine0": 0.5}, top=10**6)
    first = halved.bottlenecks[0]
    assert (first.name, first.share_GB_s, first.utilisation) == (
        "leaf0-spine0.0",
        pytest.approx(line / 2),
        pytest.approx(1.0),
    )
    shares = [b.share_GB_s for b in halved.bottlenecks]
    assert shares == sorted(shares)
    listed = {(b.name, b.direction) for b in halved.bottlenecks}
    for b in halved.bottlenecks:
        assert b.utilisation == pytest.approx(1.0) and b.limited_flows >= 1
    # the NIC links at both ends of the halved flow carry it at half their capacity: they are
    # not its bottleneck, so they are not listed (the old table said "share 47 GB/s, 50%")
    f, routing = fabric.build_fabric(s, degrade={"leaf0-spine0": 0.5})
    laid = fabric.traffic(s, 4e9, degrade={"leaf0-spine0": 0.5})
    crossing = [p for p in laid.phases[0].paths if f.id("leaf0-spine0.0", "up") in p]
    assert crossing
    ends = {(f.names[p[0]], f.directions[p[0]]) for p in crossing}
    assert ends and not ends & listed


# --------------------------------------------------------------------------- adaptive routing


def test_adaptive_routing_spreads_over_a_leafs_uplinks():
    s = scenario(nodes=512, placement="scattered", routing="adaptive")
    f, routing = fabric.build_fabric(s)
    far = int(np.flatnonzero(f.position == 511)[0])
    names = [f.names[i] for i in fabric.route(f, routing, (0, 0), (far, 0))]
    # NIC, the source leaf's pipe, its pod's pipe to the cores, the destination pod's and
    # leaf's pipes, NIC
    assert names[1].endswith(".uplinks") and names[2].startswith("pod") and len(names) == 6
    leaf = names[1]
    assert len(f.members[leaf]) == f.tree.leaf_up
    assert f.capacity_GB_s[f.id(leaf, "up")] == pytest.approx(
        f.tree.leaf_up * network.nic_GB_s(s.network), rel=1e-12
    )


def test_a_lost_spine_costs_its_share_with_adaptive_routing():
    """Crossing traffic held by the leaves' uplinks (oversubscribed 3:1, scattered): a leaf
    has 16 uplinks over 6 spines, 3 of them to spine0, so spine0 down takes 3/16 of every
    leaf's uplinks, every crossing flow runs at 13/16 of its rate and the ring's bandwidth
    time grows by 16/13; static routing piles the lost spine's flows onto the next port."""

    def seconds(routing, failed=None):
        s = scenario(oversubscription=3.0, placement="scattered", routing=routing)
        result = fabric.simulate_collective(s, 4e9, failed_switches=failed)
        latency = fabric.traffic(s, 4e9).latency_s
        return result.seconds - latency

    f, _ = fabric.build_fabric(scenario(oversubscription=3.0, placement="scattered"))
    uplinks = [c for c in f.names if c.startswith("leaf0-spine")][::2]  # up and down: once
    lost = [c for c in uplinks if c.startswith("leaf0-spine0.")]
    assert (len(uplinks), len(lost), f.tree.spines) == (16, 3, 6)
    healthy = seconds("adaptive")
    assert seconds("adaptive", {"spine0"}) == pytest.approx(healthy * 16 / 13, rel=1e-9)
    assert seconds("static", {"spine0"}) > 1.1 * seconds("static")


def test_the_reference_fabric_loses_nothing_to_one_spine_when_routing_adapts():
    """trainsim fabric llama70b-1k-fabric.yaml --fail-switch spine0: statically the
    all-reduce doubles (the survivors of one spine pile onto another); spread over the 15
    surviving spines the ring, mostly inside leaves, does not notice."""
    s = load_scenario(ROOT / "scenarios/llama70b-1k-fabric.yaml").base
    size = network.gradient_bytes_per_rank(s)
    healthy = fabric.simulate_collective(s, size).seconds
    assert fabric.simulate_collective(s, size, failed_switches={"spine0"}).seconds == healthy
    static = s.model_copy(update={"network": s.network.model_copy(update={"routing": "static"})})
    assert fabric.simulate_collective(static, size, failed_switches={"spine0"}).seconds > 1.9 * (
        healthy
    )


def test_the_engine_sees_a_spine_that_adaptive_routing_spreads_over():
    """A spread pipe uses every cable in it: the engine's degradation asks the flow model
    when any of them (or its spine) fails, and the step model says what the step loses."""
    from sim.engine.degradation import FabricDegradation
    from sim.model import perf

    s = scenario(oversubscription=3.0, placement="scattered", routing="adaptive")
    # without the wait for the slowest GPU (performance.jitter): on this 3:1 scattered
    # fabric mfu 0.45 needs a compute efficiency of 0.95 without it, above 1 with it
    s = s.model_copy(update={"performance": s.performance.model_copy(update={"jitter": 0.0})})
    degradation = FabricDegradation(s)
    assert "spine0" in degradation.used and "leaf0-spine0.0" in degradation.used
    size = network.gradient_bytes_per_rank(s)
    slower = fabric.simulate_collective(s, size, failed_switches={"spine0"}).seconds
    healthy = fabric.simulate_collective(s, size).seconds
    assert slower > healthy
    extra = perf.extra_step_s(s, perf.step_parts(s).data_parallel_s + slower - healthy)
    assert degradation.extra_step_s(frozenset({"spine0"})) == pytest.approx(extra, rel=1e-12)
    assert extra > 0
