"""NCCL-style collective costs (α–β) and fat-tree sizing. Pure functions.

Bandwidths are per direction in GB/s. A collective over `ranks` GPUs, `per_node`
of them in each node, runs as NCCL does on a rail-optimised fabric: one ring or
tree channel per NIC the group uses; the bus bandwidth is the slower of the
node's NVLink and its NICs. Latencies are NCCL's tuning model (src/graph/tuning.cc),
bus-bandwidth factors nccl-tests' definitions; docs/references.md gives each source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.model.hardware import GpuSpec
from sim.model.memory import PRECISION_BYTES
from sim.model.schema import NetworkConfig, Scenario, fat_tree_ports, max_fat_tree_endpoints

NCCL_BASE_LATENCY_S = 8.4e-6  # NCCL tuning base latency, ring and tree, Simple protocol
NVLINK_HOP_LATENCY_S = 3.4e-6  # per NVLink hop
# NVLink SHARP (NCCL's NVLS algorithm): the NVSwitch reduces and multicasts, so an all-reduce
# inside a node moves each byte once each way; nccl-tests on 8 H100s measure ~480 GB/s of
# bus bandwidth with it against ~370 GB/s for the ring (docs/references.md)
NVLS_SPEEDUP = 480.0 / 370.0
# NVSwitches with SHARP arrive with NVLink 4 (H100: 900 GB/s per GPU, both directions)
NVLS_MIN_NVLINK_GB_S = 900.0
KINDS = ("all_reduce", "reduce_scatter", "all_gather")


def nic_GB_s(net: NetworkConfig) -> float:
    """Achievable bandwidth of one NIC port, per direction: line rate (Gb/s → GB/s) × efficiency."""
    return net.link_Gb_s / 8.0 * net.efficiency


def nvlink_GB_s(gpu: GpuSpec, net: NetworkConfig) -> float:
    """Achievable NVLink bandwidth of one GPU, per direction (the spec sheet gives both directions)."""
    return gpu.nvlink_GB_s / 2.0 * net.nvlink_efficiency


@dataclass(frozen=True)
class Group:
    """The GPUs of one collective: `nodes` nodes with `per_node` ranks each."""

    nodes: int
    per_node: int

    @property
    def ranks(self) -> int:
        return self.nodes * self.per_node


def channels(group: Group, net: NetworkConfig, gpus_per_node: int) -> int:
    """NICs (rails) the group's ranks in one node drive: each GPU's traffic leaves on its own rail."""
    gpus_per_nic = gpus_per_node // net.nics_per_node
    return max(1, math.ceil(group.per_node / gpus_per_nic))


def bus_GB_s(group: Group, net: NetworkConfig, gpu: GpuSpec, gpus_per_node: int) -> float:
    """The bandwidth a ring or tree of this group sustains (nccl-tests 'busbw' at large sizes).

    Inside one node every GPU forwards one chunk per channel over NVLink. Across
    nodes each channel leaves on its own rail, and each GPU forwards k−1 of the k
    channels over NVLink (the channel's entry GPU hands over to the NIC), so the
    NVLink bound is B_nvlink·k/(k−1) against k NICs.
    """
    nvlink = nvlink_GB_s(gpu, net)
    k = group.per_node
    if group.nodes == 1:
        return nvlink
    nics = channels(group, net, gpus_per_node) * nic_GB_s(net)
    return min(nvlink * k / (k - 1), nics) if k > 1 else nics


def step_latency_s(group: Group, net: NetworkConfig) -> float:
    """One step of a collective waits for its slowest hop: inter-node once the group spans nodes."""
    return net.latency_us * 1e-6 if group.nodes > 1 else NVLINK_HOP_LATENCY_S


def bus_factor(kind: str, ranks: int) -> float:
    """nccl-tests: busbw = algbw × factor."""
    if ranks <= 1:
        return 0.0
    return 2.0 * (ranks - 1) / ranks if kind == "all_reduce" else (ranks - 1) / ranks


@dataclass(frozen=True)
class CollectiveCost:
    kind: str
    algorithm: str
    size_bytes: float
    ranks: int
    seconds: float
    latency_s: float
    bandwidth_s: float

    @property
    def algbw_GB_s(self) -> float:
        return self.size_bytes / 1e9 / self.seconds if self.seconds > 0 else math.inf

    @property
    def busbw_GB_s(self) -> float:
        return self.algbw_GB_s * bus_factor(self.kind, self.ranks)


def ring_cost(
    kind: str, size_bytes: float, ranks: int, bw_GB_s: float, alpha_s: float
) -> tuple[float, float]:
    """(latency, bandwidth) seconds of a ring: all-reduce 2(n−1)·α + 2(n−1)/n·S/B; RS/AG half that."""
    if ranks <= 1:
        return 0.0, 0.0
    steps = 2 * (ranks - 1) if kind == "all_reduce" else ranks - 1
    return NCCL_BASE_LATENCY_S + steps * alpha_s, steps / ranks * size_bytes / (bw_GB_s * 1e9)


def nvls_cost(size_bytes: float, ranks: int, nvlink_bus_GB_s: float) -> tuple[float, float]:
    """(latency, bandwidth) seconds of an NVLS all-reduce inside one node: up to the switch
    and back (two NVLink hops after NCCL's base latency), and 2(n−1)/n·S at the ring's
    NVLink bus bandwidth × NVLS_SPEEDUP (the same nccl-tests bus-bandwidth convention)."""
    if ranks <= 1:
        return 0.0, 0.0
    latency = NCCL_BASE_LATENCY_S + 2 * NVLINK_HOP_LATENCY_S
    bandwidth = 2.0 * (ranks - 1) / ranks * size_bytes / (nvlink_bus_GB_s * NVLS_SPEEDUP * 1e9)
    return latency, bandwidth


def tree_cost(size_bytes: float, nodes: int, bw_GB_s: float, alpha_s: float) -> tuple[float, float]:
    """(latency, bandwidth) seconds of a double-binary-tree all-reduce: 2·⌈log2 n⌉·α + 2·S/B
    (reduce up, then broadcast down; each rank moves S each way over its trees)."""
    if nodes <= 1:
        return 0.0, 0.0
    depth = math.ceil(math.log2(nodes))
    return NCCL_BASE_LATENCY_S + 2 * depth * alpha_s, 2.0 * size_bytes / (bw_GB_s * 1e9)


def collective(
    kind: str,
    size_bytes: float,
    group: Group,
    net: NetworkConfig,
    gpu: GpuSpec,
    gpus_per_node: int,
    algorithm: str | None = None,
) -> CollectiveCost:
    """Cost of one collective of `size_bytes` per rank over `group`.

    `algorithm` defaults to the scenario's `network.collective`; `auto` picks the
    fastest at this size and group, as NCCL's tuner does: ring, or the double binary tree
    between nodes, or NVLS (NVLink SHARP) for an all-reduce inside one node of NVLink 4
    GPUs. Reduce-scatter and all-gather are rings.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; expected one of {KINDS}")
    algorithm = algorithm or net.collective
    bw = bus_GB_s(group, net, gpu, gpus_per_node)
    alpha = step_latency_s(group, net)
    candidates = {"ring": ring_cost(kind, size_bytes, group.ranks, bw, alpha)}
    if kind == "all_reduce" and group.nodes > 1:
        # the tree runs between nodes; inside a node the ranks form a chain over NVLink
        candidates["tree"] = tree_cost(size_bytes, group.nodes, bw, alpha)
    if (
        kind == "all_reduce"
        and group.nodes == 1
        and group.ranks > 1
        and gpu.nvlink_GB_s >= NVLS_MIN_NVLINK_GB_S
    ):
        candidates["nvls"] = nvls_cost(size_bytes, group.ranks, bw)
    if algorithm == "auto":
        algorithm = min(candidates, key=lambda a: sum(candidates[a]))
    elif algorithm not in candidates:
        algorithm = "ring"  # a tree of one node, or RS/AG: NCCL runs a ring
    latency, bandwidth = candidates[algorithm]
    return CollectiveCost(
        kind, algorithm, size_bytes, group.ranks, latency + bandwidth, latency, bandwidth
    )


@dataclass(frozen=True)
class Layout:
    """Where the ranks of the job sit: tensor innermost, then context, then pipeline, then
    data parallel (Megatron's order, tp-cp-...-pp with data parallel outside the pipeline)."""

    nodes: int
    gpus_per_node: int
    tensor: int
    pipeline: int
    context: int = 1

    @property
    def data_parallel(self) -> int:
        return self.nodes * self.gpus_per_node // (self.tensor * self.context * self.pipeline)

    def dp_groups(self) -> list[list[tuple[int, int]]]:
        """Each gradient-reduction group as (node, local gpu) pairs in rank order: the
        data-parallel replicas of one (tensor, pipeline) position, and with context
        parallelism its context ranks too (they hold the same weights: Megatron reduces
        gradients over data × context)."""
        groups = []
        inner = self.tensor * self.context
        for p in range(self.pipeline):
            for t in range(self.tensor):
                members = []
                for d in range(self.data_parallel):
                    for c in range(self.context):
                        rank = (d * self.pipeline + p) * inner + c * self.tensor + t
                        members.append((rank // self.gpus_per_node, rank % self.gpus_per_node))
                groups.append(members)
        return groups

    def everyone(self) -> list[list[tuple[int, int]]]:
        return [[(n, g) for n in range(self.nodes) for g in range(self.gpus_per_node)]]

    def dp_group(self) -> Group:
        """Shape of one data-parallel group (all groups have the same shape)."""
        members = self.dp_groups()[0]
        nodes = len({n for n, _ in members})
        return Group(nodes, len(members) // nodes)


def parameter_bytes_per_rank(scenario: Scenario) -> float:
    """The parameters of one rank's model shard, in `memory.param_precision` (bf16: 2 bytes
    each): the parameters split over tensor × pipeline (context ranks hold the same ones)."""
    para = scenario.parallelism
    bytes_per = PRECISION_BYTES[scenario.memory.param_precision]
    return bytes_per * scenario.model.params / (para.tensor * para.pipeline)


def gradient_bytes_per_rank(scenario: Scenario) -> float:
    """DDP/ZeRO-1/2 gradient all-reduce: the gradients of the rank's shard in
    `memory.grad_precision` (bf16: 2 bytes per parameter; Megatron-LM's --bf16 default
    reduces fp32, 4; ZeRO's reduce-scatter + all-gather move the same); ZeRO-3 (FSDP) moves
    1.5 times that per step (its parameters' all-gathers come on top; Rajbhandari et al.
    2020)."""
    para = scenario.parallelism
    bytes_per = PRECISION_BYTES[scenario.memory.grad_precision]
    volume = bytes_per * scenario.model.params / (para.tensor * para.pipeline)
    return volume * 1.5 if scenario.parallelism.zero_stage == 3 else volume


# A transformer layer's parameter tensors (GPT: the two layer norms' weights and biases,
# the QKV, projection and two MLP matrices and their biases): the collectives of one
# layer's ZeRO-3 gather when each tensor is gathered on its own (zero3_gather: tensor)
TENSORS_PER_LAYER = 12


def zero3_gather_latency_s(scenario: Scenario) -> float:
    """The latency of one ZeRO-3 all-gather (or reduce-scatter) over a data-parallel
    group: the ring's (n − 1) steps, paid once per collective whatever its size."""
    cluster = scenario.cluster
    return collective(
        "all_gather",
        0.0,
        layout(scenario).dp_group(),
        scenario.network,
        cluster.gpu_spec,
        cluster.gpus_per_node,
    ).latency_s


def layout(scenario: Scenario) -> Layout:
    para, cluster = scenario.parallelism, scenario.cluster
    return Layout(cluster.nodes, cluster.gpus_per_node, para.tensor, para.pipeline, para.context)


def gradient_allreduce(scenario: Scenario, algorithm: str | None = None) -> CollectiveCost:
    """Analytic cost of the gradient all-reduce over one data-parallel group."""
    cluster = scenario.cluster
    return collective(
        "all_reduce",
        gradient_bytes_per_rank(scenario),
        layout(scenario).dp_group(),
        scenario.network,
        cluster.gpu_spec,
        cluster.gpus_per_node,
        algorithm,
    )


def tensor_parallel_s(
    scenario: Scenario, data_parallel: float | None = None, microbatches: float | None = None
) -> float:
    """Tensor-parallel all-reduces inside the node per step and GPU (Megatron: 2 forward and
    2 backward per layer and microbatch, each of tokens·hidden bf16 activations, the tokens
    a context rank holds; by the scenario's `network.collective`: with `auto`, NVLS where
    the GPUs have it), with the
    job's data-parallel size and `parallelism.microbatches` unless given (sim.model.perf gives
    the ones that follow from the batch, and a shrunk data-parallel size)."""
    para, model, cluster = scenario.parallelism, scenario.model, scenario.cluster
    if para.tensor == 1:
        return 0.0
    assert model.layers and model.hidden
    dp = layout(scenario).data_parallel if data_parallel is None else data_parallel
    tokens = model.global_batch_tokens / dp / para.context  # a context rank's share
    layers = model.layers / para.pipeline
    volume = 4 * layers * tokens * model.hidden * 2.0
    ops = 4 * layers * ((para.microbatches or 1) if microbatches is None else microbatches)
    group = Group(1, para.tensor)
    one = collective(
        "all_reduce",
        volume,
        group,
        scenario.network,
        cluster.gpu_spec,
        cluster.gpus_per_node,
    )
    return one.seconds + (ops - 1) * one.latency_s


# --------------------------------------------------------------------------- fat tree


@dataclass(frozen=True)
class FatTree:
    """Switch and cable counts of a rail-optimised fat tree for `endpoints` NIC ports."""

    endpoints: int
    radix: int
    oversubscription: float
    tiers: int
    leaf_down: int  # leaf ports facing endpoints
    leaf_up: int  # leaf ports facing spines
    leaves: int
    spines: int
    cores: int
    cables: int
    link_GB_s: float  # line rate per port, per direction

    @property
    def switches(self) -> int:
        return self.leaves + self.spines + self.cores

    @property
    def bisection_GB_s(self) -> float:
        """Half the endpoints talking to the other half, at line rate, thinned by oversubscription."""
        return self.endpoints / 2.0 * self.link_GB_s / self.oversubscription

    @property
    def leaves_per_pod(self) -> int:
        return self.leaves if self.tiers < 3 else (self.radix // 2) ** 2 // self.leaf_up


def fat_tree(
    endpoints: int,
    radix: int,
    oversubscription: float = 1.0,
    link_Gb_s: float = 400.0,
    rails: int = 1,
) -> FatTree:
    """Size a fat tree: leaves split ports down:up = oversubscription:1.

    Two tiers while every leaf can reach every spine (leaves ≤ radix, so up to
    radix²/2 endpoints non-blocking); else three tiers of pods (up to radix³/4).
    Non-blocking counts match NVIDIA's SuperPOD (k=64): 1,024 GPUs → 32 leaf +
    16 spine; 4,096 → 128 + 128 + 64 core; 16,384 → 512 + 512 + 256. With
    `rails` NICs per node (rail-optimised), a leaf serves one rail of `down` nodes.
    """
    k = radix
    down, up = fat_tree_ports(k, oversubscription)
    leaves = math.ceil(endpoints / rails / down) * rails
    uplinks = leaves * up
    if leaves <= k:  # every leaf reaches every spine: two tiers
        tiers, spines, cores = 2, math.ceil(uplinks / k), 0
        cables = endpoints + uplinks
    else:  # pods of leaves and spines under a core layer
        if endpoints > max_fat_tree_endpoints(k, oversubscription):
            raise ValueError(f"{endpoints} endpoints exceed a three-tier fat tree of radix {k}")
        tiers, spines = 3, math.ceil(uplinks / (k // 2))
        cores = math.ceil(spines * (k // 2) / k)
        cables = endpoints + uplinks + spines * (k // 2)
    return FatTree(
        endpoints,
        k,
        oversubscription,
        tiers,
        down,
        up,
        leaves,
        spines,
        cores,
        cables,
        link_Gb_s / 8.0,
    )


def scenario_fat_tree(scenario: Scenario) -> FatTree:
    """The fat tree the scenario's job runs on: one NIC port per rail of each node. The one
    place the scenario's tree is sized (calculator, flow model and engine all ask here)."""
    net = scenario.network
    return fat_tree(
        scenario.cluster.nodes * net.nics_per_node,
        net.switch_radix,
        net.oversubscription,
        net.link_Gb_s,
        net.nics_per_node,
    )


def _peer_GB_s(scenario: Scenario, span_gpus: int) -> tuple[float, float]:
    """(bandwidth GB/s, latency s) of one GPU's point-to-point sends to a peer `span_gpus`
    ranks away: NVLink inside a node, else its share of the node's NICs (one rail each)."""
    net, cluster = scenario.network, scenario.cluster
    if span_gpus < cluster.gpus_per_node:
        return nvlink_GB_s(cluster.gpu_spec, net), NVLINK_HOP_LATENCY_S
    share = min(1.0, net.nics_per_node / cluster.gpus_per_node)
    return nic_GB_s(net) * share, net.latency_us * 1e-6


def pipeline_send_s(scenario: Scenario) -> float:
    """One stage-to-stage send of one microbatch's activations (or their gradients) from
    one GPU: seq_len/context · micro_batch_size · hidden bf16 values split over the tensor
    ranks (Megatron's scatter-gather: each sends its 1/tensor share). Between nodes when a
    stage (tensor × context GPUs) fills a node or more."""
    para, model = scenario.parallelism, scenario.model
    if para.pipeline == 1:
        return 0.0
    assert model.seq_len and model.hidden
    size = model.seq_len / para.context * para.micro_batch_size * model.hidden * 2.0 / para.tensor
    bandwidth, latency = _peer_GB_s(scenario, para.tensor * para.context)
    return latency + size / (bandwidth * 1e9)


def context_parallel_s(scenario: Scenario, microbatches: float) -> float:
    """The context-parallel ring's traffic per step and GPU (ring attention, Megatron's CP):
    each layer passes its keys and values round the `context` ranks in the forward pass
    ((context − 1) blocks of 2 · seq_len/context · micro_batch_size · kv_hidden bf16
    values over the tensor ranks), and keys, values and their gradients in the backward
    (twice that); kv_hidden = hidden · kv_heads / heads."""
    para, model = scenario.parallelism, scenario.model
    if para.context == 1:
        return 0.0
    assert model.seq_len and model.hidden and model.layers
    heads = model.heads or model.hidden // 128
    kv_hidden = model.hidden * (model.kv_heads or heads) / heads
    block = 2 * model.seq_len / para.context * para.micro_batch_size * kv_hidden * 2.0
    block /= para.tensor
    bandwidth, latency = _peer_GB_s(scenario, para.tensor)
    per_layer = 3 * (para.context - 1) * (latency + block / (bandwidth * 1e9))
    return per_layer * model.layers / para.pipeline * microbatches
