"""Collective costs and fat-tree sizing against docs/references.md."""

from __future__ import annotations

import pytest

from sim.model import network, perf
from sim.model.hardware import GPUS
from sim.model.scenario import load_scenario
from sim.model.schema import NetworkConfig
from tests.conftest import ROOT

H100 = GPUS["H100-SXM"]
NDR = NetworkConfig(nics_per_node=8)


@pytest.mark.parametrize(
    ("gpus", "tiers", "leaves", "spines", "cores"),
    [
        (1024, 2, 32, 16, 0),  # NVIDIA SuperPOD, NDR, radix 64
        (2048, 2, 64, 32, 0),
        (4096, 3, 128, 128, 64),
        (16384, 3, 512, 512, 256),
    ],
)
def test_superpod_sizing(gpus, tiers, leaves, spines, cores):
    tree = network.fat_tree(gpus, 64, 1.0, 400, rails=8)
    assert (tree.tiers, tree.leaves, tree.spines, tree.cores) == (tiers, leaves, spines, cores)
    assert tree.cables == (2 * gpus if tiers == 2 else 3 * gpus)  # fat-tree cabling: N + N, or 3N


def test_oversubscription_thins_the_uplinks():
    tree = network.fat_tree(1024, 64, 3.0, 400)
    assert (tree.leaf_down, tree.leaf_up) == (48, 16)
    assert tree.bisection_GB_s == pytest.approx(
        network.fat_tree(1024, 64, 1.0, 400).bisection_GB_s / 3
    )


def test_nccl_tests_bus_bandwidth_at_large_sizes():
    # all GPUs of 16 nodes, 8 NDR NICs each, 16 GB (nccl-tests' top size): measured busbw
    # ~370-390 GB/s (docs/references.md)
    cost = network.collective("all_reduce", 16e9, network.Group(16, 8), NDR, H100, 8, "ring")
    assert 370 <= cost.busbw_GB_s <= 390
    # one node over NVLink: ~370 GB/s measured
    inside = network.collective("all_reduce", 8e9, network.Group(1, 8), NDR, H100, 8, "ring")
    assert 360 <= inside.busbw_GB_s <= 380


def test_small_messages_are_latency_bound():
    cost = network.collective("all_reduce", 8e3, network.Group(16, 8), NDR, H100, 8, "ring")
    assert cost.latency_s > 0.95 * cost.seconds
    auto = network.collective("all_reduce", 8e3, network.Group(16, 8), NDR, H100, 8, "auto")
    assert (
        auto.algorithm == "tree" and auto.seconds < cost.seconds
    )  # NCCL picks the tree when small
    # auto is the faster of the two at every size; a large message on few nodes favours the ring
    big = network.collective("all_reduce", 8e9, network.Group(2, 8), NDR, H100, 8, "auto")
    assert big.algorithm == "ring"
    for size in (8e3, 8e6, 8e9):
        costs = [
            network.collective("all_reduce", size, network.Group(16, 8), NDR, H100, 8, a).seconds
            for a in ("ring", "tree", "auto")
        ]
        assert costs[2] == min(costs[:2])


def test_alpha_beta_formulas():
    lat, bw = network.ring_cost("all_reduce", 1e9, 4, 10.0, 1e-5)
    assert lat == pytest.approx(network.NCCL_BASE_LATENCY_S + 6 * 1e-5)
    assert bw == pytest.approx(2 * 3 / 4 * 1e9 / 10e9)
    lat, bw = network.ring_cost("all_gather", 1e9, 4, 10.0, 1e-5)
    assert bw == pytest.approx(3 / 4 * 1e9 / 10e9)
    assert network.bus_factor("all_reduce", 8) == pytest.approx(1.75)


def compute_mode(*overrides: str):
    return load_scenario(
        ROOT / "scenarios/llama70b-1k.yaml",
        ["performance.mfu=null", "performance.compute_efficiency=0.65", *overrides],
    ).base


def test_compute_efficiency_mode_gives_a_published_mfu():
    breakdown = perf.step_breakdown(compute_mode())
    assert (
        0.40 <= breakdown.mfu <= 0.55
    )  # Megatron/PaLM/Llama 3/MegaScale range (docs/references.md)
    assert breakdown.step_s == pytest.approx(
        breakdown.compute_s
        + breakdown.tensor_parallel_s
        + breakdown.bubble_s
        + breakdown.exposed_data_parallel_s
        + breakdown.pipeline_send_s
        + breakdown.context_parallel_s
        + breakdown.slowest_gpu_s
        + breakdown.optimizer_s
    )
    assert breakdown.bubble_s == pytest.approx(
        (
            breakdown.compute_s
            + breakdown.slowest_gpu_s
            + breakdown.tensor_parallel_s
            + breakdown.pipeline_send_s
        )
        * 3
        / 32
    )
    assert perf.mfu(compute_mode()) == breakdown.mfu


def test_slower_links_lower_the_mfu():
    hdr, ndr, xdr = (perf.mfu(compute_mode(f"network.link_Gb_s={g}")) for g in (200, 400, 800))
    assert hdr < ndr < xdr
    # the all-reduce outlasts what the last microbatch's backward hides (0.8 of it), so
    # the whole of a slower fabric's extra time shows, whatever the overlap
    steps = {
        (g, o): perf.step_time_s(compute_mode(f"network.link_Gb_s={g}", f"performance.overlap={o}"))
        for g in (200, 400)
        for o in (0, 0.8)
    }
    assert steps[200, 0.8] - steps[400, 0.8] == pytest.approx(
        steps[200, 0] - steps[400, 0], rel=1e-9
    )
    assert steps[400, 0] > steps[400, 0.8]


def test_derived_mfu_sees_placement_and_oversubscription():
    contiguous = perf.mfu(compute_mode())
    assert perf.mfu(compute_mode("network.oversubscription=3")) == pytest.approx(contiguous)
    scattered = perf.mfu(compute_mode("network.placement=scattered"))
    thin = perf.mfu(compute_mode("network.placement=scattered", "network.oversubscription=3"))
    # adaptive routing (the default) runs any placement at full rate on a non-blocking
    # tree; static routes collide when the ring's hops cross leaves
    assert thin < scattered == pytest.approx(contiguous, rel=1e-12)
    static = "network.routing=static"
    assert perf.mfu(compute_mode("network.placement=scattered", static)) < contiguous


def test_context_ranks_join_the_gradient_reduction_group():
    """tensor 2, context 2, pipeline 2 on 2 nodes of 8: ranks are tensor, then context,
    then pipeline, then data parallel; a reduction group holds the data-parallel replicas
    of one (tensor, pipeline) position and its two context ranks (the same weights)."""
    layout = network.Layout(nodes=2, gpus_per_node=8, tensor=2, pipeline=2, context=2)
    assert layout.data_parallel == 2
    groups = layout.dp_groups()
    assert len(groups) == 4  # pipeline x tensor positions
    # (pipeline 0, tensor 0): replica 0's context ranks 0 and 2, replica 1's 8 and 10
    assert groups[0] == [(0, 0), (0, 2), (1, 0), (1, 2)]
    assert layout.dp_group() == network.Group(2, 2)


def test_nccl_picks_nvls_inside_an_h100_node():
    """NVLink SHARP (NCCL's NVLS): an all-reduce inside one node of NVLink 4 GPUs moves
    2(n − 1)/n · S at 480/370 of the ring's NVLink bus bandwidth, after two NVLink hops
    (up to the switch and back): ~480 GB/s of bus bandwidth on 8 H100s (nccl-tests)."""
    auto = network.collective("all_reduce", 8e9, network.Group(1, 8), NDR, H100, 8, "auto")
    ring = network.collective("all_reduce", 8e9, network.Group(1, 8), NDR, H100, 8, "ring")
    assert auto.algorithm == "nvls" and 470 <= auto.busbw_GB_s <= 490
    bus = network.nvlink_GB_s(H100, NDR) * 480 / 370
    by_hand = 8.4e-6 + 2 * 3.4e-6 + 2 * 7 / 8 * 8e9 / (bus * 1e9)
    assert auto.seconds == pytest.approx(by_hand, rel=1e-12) and auto.seconds < ring.seconds
    # A100s (NVLink 3) have no NVLS, and between nodes the choice is ring or tree
    a100 = GPUS["A100-80GB"]
    assert (
        network.collective("all_reduce", 8e9, network.Group(1, 8), NDR, a100, 8, "auto").algorithm
        == "ring"
    )
    between = network.collective("all_reduce", 8e9, network.Group(2, 8), NDR, H100, 8, "auto")
    assert between.algorithm in ("ring", "tree")
