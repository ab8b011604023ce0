"""The step model (pure functions, no simulation).

FLOPs per step, the step time (built up from compute, tensor- and context-parallel
traffic, pipeline sends, the pipeline bubble and the data-parallel traffic the schedule
leaves exposed, calibrated to the scenario's MFU at its own configuration or fitted to
several measured points), total steps and ideal time-to-train, and whether a
configuration can run at all (batch split, tensor parallelism inside a node, GPU memory,
a tier that holds the checkpoints kept). Beside it: the batch split
(`sim.model.batch`), GPU memory (`sim.model.memory`), checkpoint sizes and times
(`sim.model.checkpoints`), failure rates and the Young/Daly interval theory
(`sim.model.reliability`); the calculator's report of all of it is `sim.model.calculator`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import optimize, stats

from sim.model import fabric, network
from sim.model.batch import data_parallel_size, gpus_per_replica, microbatches
from sim.model.checkpoints import checkpoint_GB
from sim.model.memory import (
    MEMORY_UNCERTAINTY,
    PRECISION_BYTES,
    MemoryUse,
    memory_use,
    sharding_ranks,
)
from sim.model.schema import Scenario, reference_scenario

HOUR_S = 3600.0
DAY_S = 86400.0


# --------------------------------------------------------------------------- compute


def flops_per_token(scenario: Scenario) -> float:
    """6N for the dense matmuls (fwd + bwd), plus 12·L·h·T attention when the shape is given."""
    model = scenario.model
    if model.flops_per_token is not None:
        return model.flops_per_token
    flops = 6.0 * model.params
    if model.layers and model.hidden and model.seq_len:
        flops += 12.0 * model.layers * model.hidden * model.seq_len
    return flops


def total_steps(scenario: Scenario) -> int:
    return math.ceil(scenario.model.tokens / scenario.model.global_batch_tokens)


def model_flops_per_gpu_step(scenario: Scenario) -> float:
    return flops_per_token(scenario) * scenario.model.global_batch_tokens / scenario.cluster.gpus


@dataclass(frozen=True)
class StepBreakdown:
    """Where one optimizer step's time goes (seconds), and the MFU that follows (the one
    formula, `compose_step`; docs/sizing.md draws it):

    busy = compute + slowest GPU + tensor-parallel + context-parallel
           + exposed pipeline sends + exposed ZeRO-3 gathers,
    step = busy · (1 + bubble share) + exposed data-parallel reduction + optimizer step,
    bubble share = (pipeline − 1) / (virtual stages · microbatches),
    slowest GPU = compute · jitter · E[max of the job's N GPUs' standard normal draws]."""

    compute_s: float
    tensor_parallel_s: float
    bubble_s: float
    data_parallel_s: float  # the whole data-parallel traffic of a step
    exposed_data_parallel_s: float  # of it, what no compute hides (ZeRO-3's included)
    step_s: float
    mfu: float
    collective: str  # ring | tree | nvls, as chosen for the gradient all-reduce
    pipeline_send_s: float = 0.0  # stage-to-stage sends not hidden
    context_parallel_s: float = 0.0  # the context-parallel ring's traffic not hidden
    slowest_gpu_s: float = 0.0  # the synchronous step waits for its slowest GPU's compute
    optimizer_s: float = 0.0  # the optimizer's update of the GPU's shard, after the step

    def shares(self) -> dict[str, float]:
        """Each part's share of the step (they add up to 1)."""
        exposed = self.exposed_data_parallel_s
        parts = {
            "compute": self.compute_s,
            "pipeline bubble": self.bubble_s,
            "exposed data-parallel": exposed,
            "pipeline sends": self.pipeline_send_s,
            "tensor-parallel": self.tensor_parallel_s,
            "context-parallel": self.context_parallel_s,
            "slowest GPU": self.slowest_gpu_s,
            "optimizer step": self.optimizer_s,
        }
        return {name: seconds / self.step_s for name, seconds in parts.items()}


@dataclass(frozen=True)
class StepParts:
    """What the step of one configuration is built from (per GPU, one optimizer step)."""

    model_flops: float  # the model FLOPs MFU counts
    compute_flops: float  # the FLOPs executed: full recomputation runs the forward twice
    peak_flops: float  # FLOP/s
    tensor_parallel_s: float
    bubble_share: float  # (pipeline − 1) / (virtual stages · microbatches)
    data_parallel_s: float  # the gradient all-reduce (ZeRO-3: its traffic per microbatch)
    overlap: float  # the best share of the compute beside a transfer that hides it
    collective: str
    microbatches: float = 1.0  # per replica and step
    forward_share: float = 1.0 / 3.0  # of the compute: the forward passes (the rest: backward)
    buckets: int = 1  # the gradient reduction is issued in this many buckets
    zero_stage: int = 0
    # ZeRO-3: collectives per pass over the stage's layers (one a layer, or one a tensor), the
    # latency each pays, whether the gathers are prefetched behind compute (zero3_gather:
    # layer) or issued when the module runs (tensor), and whether the backward gathers
    # again for its recomputed forward (gathered per module with full recomputation)
    zero3_collectives: float = 1.0
    zero3_latency_s: float = 0.0
    zero3_prefetched: bool = True
    zero3_regather: bool = False
    pipeline_sends: float = 0.0  # stage-to-stage sends per step on one GPU's critical path
    pipeline_send_s: float = 0.0  # one send
    sends_overlap: bool = False  # the interleaved schedule overlaps sends with compute
    context_parallel_s: float = 0.0
    pipeline: int = 1
    virtual_stages: int = 1  # model chunks per stage: their gradients reduce chunk by chunk
    slowest_factor: float = 0.0  # jitter × E[max of N standard normals] (`slowest_of`)
    # ZeRO 1-2: the all-gather moves parameters, the reduce-scatter gradients: the
    # gather's bytes per byte of the reduction (param over grad precision)
    gather_ratio: float = 1.0
    optimizer_s: float = 0.0  # the optimizer step (`optimizer_step_s`)


class CalibrationError(ValueError):
    """No compute efficiency ≤ 1 gives the stated MFU at its configuration."""


@dataclass(frozen=True)
class Calibration:
    """`performance.mfu` turned into the compute efficiency that gives it at the
    configuration it was measured at (the reference: `performance.mfu_at` applied)."""

    compute_efficiency: float
    mfu: float  # the stated MFU, at the reference
    mfu_at: dict[str, Any]  # where the reference differs from the scenario ({}: nowhere)
    reference_step_s: float
    at_reference: bool  # the scenario's step-relevant configuration is the reference's
    # with more measured points (performance.measured): the overlap fitted with the
    # efficiency, and each point's measured and fitted MFU (the first is `mfu`'s)
    overlap: float | None = None
    points: tuple[FittedPoint, ...] = ()


@dataclass(frozen=True)
class FittedPoint:
    """One measured MFU beside what the fitted step model gives there."""

    where: str  # the configuration, in words (describe_mfu_at)
    measured_mfu: float
    fitted_mfu: float

    @property
    def residual(self) -> float:
        return self.fitted_mfu - self.measured_mfu


# Healthy gradient all-reduce times from the flow model, by fabric configuration, and
# calibrations by configuration: memos of pure functions (not state): the same inputs
# always give the same numbers.
_DP_ALLREDUCE_S: dict[tuple, float] = {}
_CALIBRATIONS: dict[tuple, Calibration] = {}

# Full recomputation runs each layer's forward pass again in the backward pass: the forward
# is a third of the forward + backward FLOPs (Korthikanti et al. 2022, §5). Selective
# recomputation (the attention core) costs a few percent and is left in the efficiency.
FULL_RECOMPUTE_FACTOR = 4.0 / 3.0


def gradient_allreduce_s(scenario: Scenario) -> float:
    """The gradient all-reduce on the healthy fabric, from the SimPy flow model (it sees
    placement and oversubscription; on a non-blocking tree it equals the α–β ring)."""
    key = (
        scenario.model.params,
        scenario.cluster,
        scenario.parallelism,
        scenario.network,
        scenario.memory.grad_precision,
    )
    if key not in _DP_ALLREDUCE_S:
        size = network.gradient_bytes_per_rank(scenario)
        _DP_ALLREDUCE_S[key] = float(fabric.simulate_collective(scenario, size).seconds)
    return _DP_ALLREDUCE_S[key]


def gradient_allreduce_at_s(scenario: Scenario, replicas: int) -> float:
    """The gradient all-reduce when the job runs `replicas` data-parallel replicas (an
    elastic shrink): the flow model at the full size; below it, the α–β cost where the flow
    model equals it (a non-blocking tree, contiguous placement: tests/unit/test_perf.py
    checks the shipped trees), else the flow model on the nodes those replicas need."""
    if replicas == data_parallel_size(scenario):
        return gradient_allreduce_s(scenario)
    net, cluster, para = scenario.network, scenario.cluster, scenario.parallelism
    if net.oversubscription == 1.0 and net.placement == "contiguous" and para.context == 1:
        stride = para.tensor * para.pipeline  # ranks between members of one DP group
        if stride >= cluster.gpus_per_node:
            group = network.Group(replicas, 1)
        else:
            per_node = min(cluster.gpus_per_node // stride, replicas)
            group = network.Group(math.ceil(replicas / per_node), per_node)
        return network.collective(
            "all_reduce",
            network.gradient_bytes_per_rank(scenario),
            group,
            net,
            cluster.gpu_spec,
            cluster.gpus_per_node,
        ).seconds
    return gradient_allreduce_s(shrunk_to(scenario, replicas))


def shrunk_to(scenario: Scenario, replicas: int) -> Scenario:
    """The scenario on the nodes `replicas` data-parallel replicas need (an elastic shrink)."""
    cluster = scenario.cluster
    nodes = math.ceil(replicas * gpus_per_replica(scenario) / cluster.gpus_per_node)
    return scenario.model_copy(update={"cluster": cluster.model_copy(update={"nodes": nodes})})


def bubble_share(pipeline: int, virtual_stages: int, microbatches: float | None) -> float:
    """Pipeline bubble as a share of the busy time: (p − 1) / (v · m) (Narayanan et al.
    2021; v = 1 is 1F1B / GPipe); none without a pipeline or without microbatches."""
    if pipeline == 1 or not microbatches:
        return 0.0
    return (pipeline - 1) / (virtual_stages * microbatches)


def hidden_behind(transfer_s: float, window_s: float, overlap: float, buckets: int = 1) -> float:
    """What of a transfer stays exposed when it runs beside `window_s` of compute, of which
    the framework hides at best the share `overlap`: issued in `buckets` buckets as the
    compute produces (or consumes) them, the last bucket never hides."""
    hidden = min(overlap * window_s, transfer_s * (buckets - 1) / buckets)
    return transfer_s - max(0.0, hidden)


def step_parts(scenario: Scenario, replicas: int | None = None) -> StepParts:
    """The parts of one step at the scenario's configuration, or with `replicas`
    data-parallel replicas (an elastic shrink: the global batch is fixed, so each replica
    computes full/replicas times as much, in as many more microbatches)."""
    para, model = scenario.parallelism, scenario.model
    full = data_parallel_size(scenario)
    replicas = full if replicas is None else replicas
    flops = model_flops_per_gpu_step(scenario)
    if replicas != full:
        flops *= full / replicas
    m = microbatches(scenario, replicas)
    if para.tensor > 1 and model.layers and model.hidden:
        tp = network.tensor_parallel_s(scenario, data_parallel=replicas, microbatches=m)
    else:
        tp = 0.0  # no tensor parallelism, or no shape to size its traffic from
    shaped = bool(model.seq_len and model.hidden)
    sends = 2.0 * para.virtual_stages * (m or 1) if para.pipeline > 1 and shaped else 0.0
    context = (
        network.context_parallel_s(scenario, m or 1.0)
        if para.context > 1 and shaped and model.layers
        else 0.0
    )
    full_recompute = para.recompute == "full"
    dp_bytes = network.gradient_bytes_per_rank(scenario)
    layers = model.layers / para.pipeline if model.layers else 1.0
    per_tensor = para.zero3_gather == "tensor"
    return StepParts(
        model_flops=flops,
        compute_flops=flops * (FULL_RECOMPUTE_FACTOR if full_recompute else 1.0),
        peak_flops=scenario.cluster.gpu_spec.peak_tflops * 1e12,
        tensor_parallel_s=tp,
        bubble_share=bubble_share(para.pipeline, para.virtual_stages, m),
        data_parallel_s=gradient_allreduce_at_s(scenario, replicas),
        overlap=scenario.performance.overlap,
        collective=network.gradient_allreduce(scenario).algorithm,
        microbatches=m or 1.0,
        # the forward is a third of forward + backward; full recomputation runs it again
        # in the backward pass, so it is a quarter of what runs
        forward_share=0.25 if full_recompute else 1.0 / 3.0,
        buckets=max(1, math.ceil(dp_bytes / (scenario.performance.bucket_MB * 1e6))),
        zero_stage=para.zero_stage,
        zero3_collectives=layers * (network.TENSORS_PER_LAYER if per_tensor else 1),
        zero3_latency_s=(
            network.zero3_gather_latency_s(
                scenario if replicas == full else shrunk_to(scenario, replicas)
            )
            if para.zero_stage == 3
            else 0.0
        ),
        zero3_prefetched=not per_tensor,
        zero3_regather=per_tensor and full_recompute,
        pipeline_sends=sends,
        pipeline_send_s=network.pipeline_send_s(scenario) if sends else 0.0,
        sends_overlap=para.virtual_stages > 1,
        context_parallel_s=context,
        pipeline=para.pipeline,
        virtual_stages=para.virtual_stages,
        slowest_factor=scenario.performance.jitter
        * slowest_of(replicas * gpus_per_replica(scenario)),
        optimizer_s=optimizer_step_s(scenario, replicas),
        gather_ratio=PRECISION_BYTES[scenario.memory.param_precision]
        / PRECISION_BYTES[scenario.memory.grad_precision],
    )


def slowest_of(gpus: int) -> float:
    """The expected largest of `gpus` independent standard normal draws (Blom's
    approximation of the order statistic, Φ⁻¹((N − 0.375)/(N + 0.25)): 0 for one GPU,
    1.05 for 4, 2.48 for 96, 3.07 for 576, 3.64 for 4,608). A synchronous step waits for
    its slowest GPU, so the compute of N GPUs whose times spread with coefficient of
    variation `performance.jitter` takes compute × (1 + jitter × slowest_of(N))."""
    if gpus <= 1:
        return 0.0
    return float(stats.norm.ppf((gpus - 0.375) / (gpus + 0.25)))


# Adam's update reads and writes, per parameter of the shard a GPU updates: the main
# gradient (4), the fp32 main weight (4 + 4), both moments (8 + 8) and the new 16-bit
# weight (2): 30 bytes of memory traffic, an elementwise kernel bound by HBM bandwidth
OPTIMIZER_BYTES_PER_PARAM = 30.0


def optimizer_step_s(scenario: Scenario, replicas: int | None = None) -> float:
    """The optimizer step of one GPU: its shard of the parameters (params / (tensor ×
    pipeline), over the data-parallel × context ranks with ZeRO ≥ 1) × the bytes Adam
    moves per parameter / HBM bandwidth. Nothing hides it: it runs between the gradient
    reduction and the next step's forward pass."""
    para = scenario.parallelism
    shard = scenario.model.params / (para.tensor * para.pipeline)
    if para.zero_stage >= 1:
        dp = data_parallel_size(scenario) if replicas is None else replicas
        shard /= dp * para.context
    hbm = scenario.cluster.gpu_spec.hbm_TB_s * 1e12
    return shard * OPTIMIZER_BYTES_PER_PARAM / hbm


def _exposed_traffic(
    parts: StepParts, compute_s: float, bubble_s: float = 0.0
) -> tuple[float, float, float, float]:
    """(exposed data-parallel outside the pipeline, exposed ZeRO-3 inside it, exposed
    pipeline sends, exposed context-parallel) with `compute_s` of compute per step, and
    `bubble_s` of the pipeline bubble (idle time the first stage spends in its cool-down)."""
    per_microbatch = compute_s / parts.microbatches
    forward = per_microbatch * parts.forward_share
    backward = per_microbatch - forward
    o, dp = parts.overlap, parts.data_parallel_s
    tail, zero3 = 0.0, 0.0
    if parts.zero_stage == 3:
        # every microbatch, a pass over the layers: the parameters gathered for the forward,
        # again for the backward (and for its recomputed forward when gathered per module),
        # the gradients reduce-scattered; each pass a third of the traffic (all the
        # parameters or gradients of the stage) plus the latency of its collectives.
        # Prefetched, each hides behind the compute of its pass (the first layer's never
        # does); gathered on demand, the compute waits for all of it.
        one_pass = dp / 3.0 + parts.zero3_collectives * parts.zero3_latency_s
        backward_passes = 3.0 if parts.zero3_regather else 2.0
        if parts.zero3_prefetched:
            buckets = max(1, round(parts.zero3_collectives))
            zero3 = parts.microbatches * (
                hidden_behind(one_pass, forward, o, buckets)
                + hidden_behind(backward_passes * one_pass, backward, o, buckets)
            )
        else:
            zero3 = parts.microbatches * (1.0 + backward_passes) * one_pass
    elif parts.zero_stage == 0:
        tail = hidden_behind(dp, backward, o, parts.buckets)
    else:
        # Megatron's distributed optimizer (ZeRO 1, 2) splits the all-reduce into a
        # reduce-scatter after the last microbatch's backward passes and an all-gather of
        # the updated parameters before the next step's first forward passes
        # (--overlap-grad-reduce, --overlap-param-gather), each half the ring all-reduce,
        # chunk by chunk with the interleaved schedule
        tail = chunked_reduce_scatter_s(
            dp / 2.0, backward, o, parts.buckets, parts.pipeline, parts.virtual_stages, bubble_s
        ) + chunked_all_gather_s(
            dp / 2.0 * parts.gather_ratio,
            forward,
            o,
            parts.buckets,
            parts.pipeline,
            parts.virtual_stages,
        )
    sends = parts.pipeline_sends * parts.pipeline_send_s
    if parts.sends_overlap:
        sends *= 1.0 - o
    return tail, zero3, sends, (1.0 - o) * parts.context_parallel_s


def chunked_reduce_scatter_s(
    transfer_s: float,
    backward_s: float,
    overlap: float,
    buckets: int,
    pipeline: int = 1,
    virtual_stages: int = 1,
    bubble_s: float = 0.0,
) -> float:
    """What of the gradients' reduce-scatter (Megatron's distributed optimizer with
    --overlap-grad-reduce) is left after the first stage's last backward pass. Each model
    chunk's gradients are reduced, bucket by bucket, once its last microbatch's backward
    has run: with v chunks per stage the first stage's cool-down runs them v − 1, ..., 0
    (schedules.py), chunk k finishing k·p chunk-backwards (and k/v of the cool-down's idle
    time, the bubble) before the end. One NCCL stream runs the chunks' reductions one after
    another, each hiding behind the share `overlap` of the compute and idle time after its
    chunk is ready; the last bucket of the last chunk never hides. With one chunk this is
    `hidden_behind(transfer, backward, overlap, buckets)`."""
    v = virtual_stages
    chunk_s = transfer_s / v
    chunk_backward = backward_s / v
    per_chunk = max(1.0, buckets / v)
    free = -math.inf  # when the stream is free, in seconds before (−) the end of the compute
    for k in range(v - 1, -1, -1):
        ready = -overlap * (k * (pipeline * chunk_backward + bubble_s / v))
        start = max(free, ready - overlap * chunk_backward)
        free = max(start + chunk_s, ready + chunk_s / per_chunk)
    return max(0.0, free)


def chunked_all_gather_s(
    transfer_s: float,
    forward_s: float,
    overlap: float,
    buckets: int,
    pipeline: int = 1,
    virtual_stages: int = 1,
) -> float:
    """What of the updated parameters' all-gather (--overlap-param-gather) the next step's
    forward passes wait for. The gathers are issued after the optimizer step, chunk 0
    first; chunk k is needed when the first stage starts its first forward, after k·p
    chunk-forwards of the warm-up. Each chunk's first bucket must arrive before its compute,
    the rest hide behind the share `overlap` of the compute before it is needed. With one
    chunk this is `hidden_behind(transfer, forward, overlap, buckets)`."""
    v = virtual_stages
    chunk_s = transfer_s / v
    chunk_forward = forward_s / v
    per_chunk = max(1.0, buckets / v)
    waited = 0.0
    done = 0.0  # the stream's time: gathers run back to back from the step's start
    for k in range(v):
        done += chunk_s
        needed = overlap * (k * pipeline * chunk_forward + chunk_forward)
        first_bucket = done - chunk_s + chunk_s / per_chunk
        waited = max(waited, done - needed, first_bucket - overlap * k * pipeline * chunk_forward)
    return max(0.0, waited)


def compose_at_compute_s(parts: StepParts, compute_s: float) -> StepBreakdown:
    """The step from its parts with `compute_s` of compute: the one formula of the step."""
    _, _, sends, context = _exposed_traffic(parts, compute_s)
    slowest = compute_s * parts.slowest_factor
    before = compute_s + slowest + parts.tensor_parallel_s + context + sends
    tail, zero3, sends, context = _exposed_traffic(parts, compute_s, before * parts.bubble_share)
    busy = before + zero3
    bubble = busy * parts.bubble_share
    step = busy + bubble + tail + parts.optimizer_s
    return StepBreakdown(
        compute_s,
        parts.tensor_parallel_s,
        bubble,
        parts.data_parallel_s,
        tail + zero3,
        step,
        # a step of no time at all: no compute, no traffic (solving for the compute)
        parts.model_flops / (parts.peak_flops * step) if step > 0 else math.inf,
        parts.collective,
        sends,
        context,
        slowest,
        parts.optimizer_s,
    )


def compose_step(parts: StepParts, compute_efficiency: float) -> StepBreakdown:
    """The step from its parts at a compute efficiency."""
    return compose_at_compute_s(
        parts, parts.compute_flops / (parts.peak_flops * compute_efficiency)
    )


def _compute_s_of(parts: StepParts, step_s: float) -> float:
    """compose_step solved for the compute time that makes a step of `step_s` (the step
    grows with the compute: hiding more never gains more than the compute added); below
    zero (the traffic alone takes longer) it returns the negative the linear part gives."""
    at_zero = compose_at_compute_s(parts, 0.0).step_s
    if at_zero >= step_s:
        return (step_s - at_zero) / (1.0 + parts.bubble_share)
    return float(
        optimize.brentq(
            lambda c: compose_at_compute_s(parts, c).step_s - step_s,
            0.0,
            step_s,
            xtol=1e-12 * step_s,
            rtol=1e-14,
        )
    )


def model_scaling(scenario: Scenario) -> str:
    """How the step time follows the configuration: `model` (mfu calibrated at its own
    configuration, the built-up model elsewhere), `fixed` (performance.mfu_scaling: fixed),
    `abstract` (mfu given, no model.seq_len: no sequences to split, MFU fixed) or
    `compute_efficiency` (built up from the given efficiency)."""
    perf_cfg = scenario.performance
    if perf_cfg.mfu is None:
        return "compute_efficiency"
    if perf_cfg.mfu_scaling == "fixed":
        return "fixed"
    return "abstract" if scenario.model.seq_len is None else "model"


def _configuration_key(scenario: Scenario) -> tuple:
    """What the step time depends on, of the configuration sections."""
    cluster = scenario.cluster
    return (
        scenario.model,
        cluster.gpu_spec,
        cluster.nodes,
        cluster.gpus_per_node,
        scenario.parallelism,
        scenario.network,
        scenario.memory,  # the precisions set the data-parallel traffic
    )


def describe_mfu_at(mfu_at: dict[str, Any]) -> str:
    """The reference configuration in words: `cluster.nodes=64, ...`, or this configuration."""
    if not mfu_at:
        return "the scenario's own configuration"
    return ", ".join(
        f"{key}={'(default)' if value is None else value}" for key, value in mfu_at.items()
    )


def calibration(scenario: Scenario) -> Calibration | None:
    """The compute efficiency that gives `performance.mfu` at its reference configuration
    (None unless the MFU follows the model: see `model_scaling`). Raises CalibrationError
    when none ≤ 1 does: the communication alone takes more than the stated step. With more
    measured points (`performance.measured`), the efficiency and the overlap fitted to all
    of them (`fitted_calibration`)."""
    if model_scaling(scenario) != "model":
        return None
    perf_cfg = scenario.performance
    key = (
        _configuration_key(scenario),
        perf_cfg.mfu,
        perf_cfg.overlap,
        perf_cfg.bucket_MB,
        perf_cfg.jitter,
        json.dumps(perf_cfg.mfu_at, sort_keys=True, default=str),
        json.dumps([p.model_dump() for p in perf_cfg.measured], sort_keys=True, default=str),
    )
    if key not in _CALIBRATIONS and perf_cfg.measured:
        _CALIBRATIONS[key] = fitted_calibration(scenario)
    if key not in _CALIBRATIONS:
        reference = reference_scenario(scenario)
        parts = step_parts(reference)
        mfu_ = perf_cfg.mfu
        assert mfu_ is not None
        step = parts.model_flops / (parts.peak_flops * mfu_)
        compute = _compute_s_of(parts, step)
        efficiency = parts.compute_flops / (parts.peak_flops * compute) if compute > 0 else math.inf
        if efficiency > 1.0:
            raise CalibrationError(_unreachable(parts, mfu_, step, efficiency, perf_cfg.mfu_at))
        _CALIBRATIONS[key] = Calibration(
            compute_efficiency=efficiency,
            mfu=mfu_,
            mfu_at=dict(perf_cfg.mfu_at),
            reference_step_s=step,
            at_reference=_configuration_key(reference) == _configuration_key(scenario),
        )
    return _CALIBRATIONS[key]


def _measured_parts(scenario: Scenario, at: dict[str, Any], where: str) -> StepParts:
    """The step's parts where a point was measured: the scenario's `mfu_at` and then the
    point's own keys applied (`where` names the point in errors)."""
    perf_cfg = scenario.performance
    moved = scenario.model_copy(
        update={"performance": perf_cfg.model_copy(update={"mfu_at": {**perf_cfg.mfu_at, **at}})}
    )
    try:
        reference = reference_scenario(moved)
    except ValueError as exc:  # pydantic's ValidationError: no valid configuration
        errors = getattr(exc, "errors", None)
        first = errors()[0] if callable(errors) else None
        why = f"{'.'.join(str(part) for part in first['loc'])}: {first['msg']}" if first else exc
        raise CalibrationError(f"{where}: the configuration is not valid: {why}") from None
    problem = step_problem(reference)
    if problem is not None:
        raise CalibrationError(f"{where}: the configuration cannot run: {problem[0]}: {problem[1]}")
    return step_parts(reference)


def fitted_calibration(scenario: Scenario) -> Calibration:
    """The compute efficiency and overlap that fit `performance.mfu` (at mfu_at) and every
    point of `performance.measured` best, by least squares on the MFU (scipy), bounded to
    (0, 1] and [0, 1]: two points fix both, more leave residuals. The fitted model then
    gives the step everywhere, the measured configurations included."""
    perf_cfg = scenario.performance
    assert perf_cfg.mfu is not None
    measured = [(perf_cfg.mfu, {}, "performance.mfu")] + [
        (point.mfu, point.at, f"performance.measured.{i}")
        for i, point in enumerate(perf_cfg.measured)
    ]
    cases = [
        (_measured_parts(scenario, at, where), mfu_, {**perf_cfg.mfu_at, **at})
        for mfu_, at, where in measured
    ]

    def mfus(x: np.ndarray) -> np.ndarray:
        efficiency, overlap = x
        return np.array(
            [compose_step(replace(parts, overlap=overlap), efficiency).mfu for parts, _, _ in cases]
        )

    wanted = np.array([mfu_ for _, mfu_, _ in cases])
    fit = optimize.least_squares(
        lambda x: mfus(x) - wanted,
        x0=[0.6, perf_cfg.overlap],
        bounds=([1e-3, 0.0], [1.0, 1.0]),
        x_scale=[0.1, 0.1],
        xtol=1e-14,
        ftol=1e-14,
        gtol=1e-14,
    )
    efficiency, overlap = (float(v) for v in fit.x)
    fitted = mfus(fit.x)
    first = cases[0][0]
    return Calibration(
        compute_efficiency=efficiency,
        mfu=perf_cfg.mfu,
        mfu_at=dict(perf_cfg.mfu_at),
        reference_step_s=first.model_flops / (first.peak_flops * perf_cfg.mfu),
        at_reference=False,  # the fitted model gives the step everywhere
        overlap=overlap,
        points=tuple(
            FittedPoint(describe_mfu_at(at), mfu_, float(model))
            for (_, mfu_, at), model in zip(cases, fitted, strict=True)
        ),
    )


def _unreachable(
    parts: StepParts, mfu_: float, step_s: float, efficiency: float, mfu_at: dict[str, Any]
) -> str:
    """Why no compute efficiency ≤ 1 gives `mfu_`: what the step's traffic takes alone."""
    traffic = compose_at_compute_s(parts, 0.0)
    needs = (
        f"a compute efficiency of {efficiency:.5g}"
        if math.isfinite(efficiency)
        else "less than no compute time"
    )
    return (
        f"mfu {mfu_:g} at {describe_mfu_at(mfu_at)} means a step of {step_s:.4g} s, but the "
        f"model's communication takes {parts.tensor_parallel_s:.4g} s of tensor-parallel "
        f"all-reduces (x {1 + parts.bubble_share:.4g} with the pipeline bubble), "
        f"{traffic.pipeline_send_s + traffic.context_parallel_s:.4g} s of pipeline sends and "
        f"context-parallel traffic and at least {traffic.exposed_data_parallel_s:.4g} s of "
        f"exposed data-parallel traffic: it would need {needs} (at most 1); lower mfu, "
        "or set performance.mfu_scaling: fixed"
    )


def _stated_mfu_step_s(scenario: Scenario) -> float:
    assert scenario.performance.mfu is not None
    return model_flops_per_gpu_step(scenario) / (
        scenario.cluster.gpu_spec.peak_tflops * 1e12 * scenario.performance.mfu
    )


def model_parts(scenario: Scenario, replicas: int | None = None) -> StepParts:
    """`step_parts` with the overlap the calibration fitted, where it fitted one."""
    parts = step_parts(scenario, replicas)
    cal = calibration(scenario)
    if cal is None or cal.overlap is None:
        return parts
    return replace(parts, overlap=cal.overlap)


def step_breakdown(scenario: Scenario) -> StepBreakdown:
    """The step's parts. At the configuration `mfu` describes (or with a fixed MFU) they
    add up to the stated MFU's step exactly; elsewhere the calibrated model gives them."""
    perf_cfg = scenario.performance
    parts = model_parts(scenario)
    if perf_cfg.mfu is None:
        assert perf_cfg.compute_efficiency is not None
        return compose_step(parts, perf_cfg.compute_efficiency)
    cal = calibration(scenario)
    if cal is not None and not cal.at_reference:
        return compose_step(parts, cal.compute_efficiency)
    step = _stated_mfu_step_s(scenario)
    built = compose_at_compute_s(parts, max(0.0, _compute_s_of(parts, step)))
    # the solved compute makes the parts add up to the stated step (to rounding): say so
    return replace(built, step_s=step, mfu=perf_cfg.mfu)


def extra_step_s(scenario: Scenario, data_parallel_s: float) -> float:
    """How much longer the job's step gets when its data-parallel traffic takes
    `data_parallel_s` instead of the healthy fabric's (a degraded or partly failed fabric):
    the step composed again at the same compute, so the part the schedule hides stays
    hidden; infinite when the traffic never ends (a partitioned fabric)."""
    if math.isinf(data_parallel_s):
        return math.inf
    parts = model_parts(scenario)
    compute = step_breakdown(scenario).compute_s
    slower = replace(parts, data_parallel_s=data_parallel_s)
    extra = (
        compose_at_compute_s(slower, compute).step_s - compose_at_compute_s(parts, compute).step_s
    )
    return max(0.0, extra)


def step_time_s(scenario: Scenario) -> float:
    """Nominal step time of the full job: the stated MFU's at its own configuration (or
    fixed), the calibrated built-up model elsewhere, or built from compute_efficiency."""
    if scenario.performance.mfu is not None:
        cal = calibration(scenario)
        if cal is None or cal.at_reference:
            return _stated_mfu_step_s(scenario)
        return compose_step(model_parts(scenario), cal.compute_efficiency).step_s
    return step_breakdown(scenario).step_s


def step_times_by_replicas(scenario: Scenario, lowest: int) -> tuple[float, ...]:
    """Step times with lowest, lowest + 1, ..., all data-parallel replicas (an elastic
    shrink), by the same model as the full job's step; empty when the MFU is fixed (fixed
    scaling, an abstract job): the step then grows as full/replicas."""
    scaling = model_scaling(scenario)
    if scaling in ("fixed", "abstract"):
        return ()
    if scaling == "compute_efficiency" and scenario.model.seq_len is None:
        return ()  # an abstract job's microbatches are given for the full size only
    full = data_parallel_size(scenario)
    cal = calibration(scenario)
    efficiency = cal.compute_efficiency if cal else scenario.performance.compute_efficiency
    assert efficiency is not None
    return tuple(
        step_time_s(scenario)
        if replicas == full
        else compose_step(model_parts(scenario, replicas), efficiency).step_s
        for replicas in range(max(1, lowest), full + 1)
    )


def mfu(scenario: Scenario) -> float:
    """The MFU at the scenario's configuration: the stated one where it was measured (or
    fixed), else what the step model gives."""
    perf_cfg = scenario.performance
    if perf_cfg.mfu is not None:
        cal = calibration(scenario)
        if cal is None or cal.at_reference:
            return perf_cfg.mfu
    return model_flops_per_gpu_step(scenario) / (
        scenario.cluster.gpu_spec.peak_tflops * 1e12 * step_time_s(scenario)
    )


# --------------------------------------------------------------------------- can it run


def configuration_problem(scenario: Scenario) -> tuple[str, str] | None:
    """Why this configuration cannot run, as (key path, message with the numbers), or None:
    `step_problem`, or a checkpoint tier that cannot hold `keep_last` checkpoints."""
    return step_problem(scenario) or storage_problem(scenario)


def step_problem(scenario: Scenario) -> tuple[str, str] | None:
    """Why the job cannot take a step in this configuration (key path, message), or None.

    tensor × pipeline must divide the job's GPUs, and tensor parallelism stays inside a
    node (the step model runs its all-reduces over NVLink). A job with sequences
    (model.seq_len) must also split its batch: whole sequences, a whole number of them per
    data-parallel replica and microbatch, agreeing with an explicit
    `parallelism.microbatches`, and at least as many microbatches as pipeline stages. The
    model states, and the activations where seq_len and the shape give them, must fit in
    the GPU's memory (an abstract job, without seq_len, has only its model states)."""
    para, model, cluster = scenario.parallelism, scenario.model, scenario.cluster
    per_replica = gpus_per_replica(scenario)
    if cluster.gpus % per_replica:
        product = "tensor*context*pipeline" if para.context > 1 else "tensor*pipeline"
        return (
            "parallelism",
            f"{product} = {per_replica} GPUs per data-parallel replica does not divide "
            f"the job's {cluster.gpus} GPUs (cluster.nodes*gpus_per_node = "
            f"{cluster.nodes}*{cluster.gpus_per_node})",
        )
    if para.tensor > cluster.gpus_per_node:
        return (
            "parallelism.tensor",
            f"tensor = {para.tensor} spans nodes: tensor parallelism runs inside a node "
            f"(its all-reduces over NVLink), and a node has cluster.gpus_per_node = "
            f"{cluster.gpus_per_node} GPUs; use tensor <= {cluster.gpus_per_node} and more "
            "pipeline stages",
        )
    if model.seq_len is not None:
        problem = _batch_problem(scenario)
        if problem is not None:
            return problem
    return _memory_problem(scenario)


def _exact(value: float) -> str:
    """A ratio with the digits that show it is not whole (1,024.000244, not 1,024)."""
    return f"{value:,.10g}"


def _batch_problem(scenario: Scenario) -> tuple[str, str] | None:
    """Whether a job with sequences splits its batch (see `step_problem`)."""
    para, model, cluster = scenario.parallelism, scenario.model, scenario.cluster
    assert model.seq_len is not None
    dp = cluster.gpus // gpus_per_replica(scenario)
    tokens, seq_len, size = model.global_batch_tokens, model.seq_len, para.micro_batch_size
    if tokens % seq_len:
        return (
            "model.global_batch_tokens",
            f"{tokens:,} tokens per step are not a whole number of sequences of "
            f"model.seq_len = {seq_len:,} ({_exact(tokens / seq_len)})",
        )
    sequences = tokens // seq_len
    if sequences % (dp * size):
        return (
            "model.global_batch_tokens",
            f"the batch of {sequences:,} sequences ({tokens:,} tokens / seq_len {seq_len:,}) "
            f"does not split over {dp:,} data-parallel replicas x micro_batch_size {size} "
            f"(= {dp * size:,}): {_exact(sequences / dp)} sequences per replica",
        )
    m = sequences // (dp * size)
    if para.microbatches is not None and para.microbatches != m:
        return (
            "parallelism.microbatches",
            f"{para.microbatches} disagrees with the batch: {sequences:,} sequences / {dp:,} "
            f"data-parallel replicas / micro_batch_size {size} = {m:,} microbatches per "
            "replica; drop the key (it follows from the batch) or change micro_batch_size",
        )
    if seq_len % para.context:
        return (
            "parallelism.context",
            f"context = {para.context} does not split sequences of model.seq_len = "
            f"{seq_len:,} into equal parts ({_exact(seq_len / para.context)} tokens each)",
        )
    # fewer microbatches than stages run: Megatron's 1F1B warms up with
    # min(p − rank − 1, m) forward passes (schedules.py, forward_backward_pipelining_without_
    # interleaving), the pipeline never fills and the bubble is (p − 1)/m of the busy time
    # (BLOOM-176B's batch ramp-up ran 16 sequences on 12 stages); the interleaved schedule
    # too (Llama 3's flexible schedule, Dubey et al. 2024 §3.3.2)
    return None


def _memory_problem(scenario: Scenario) -> tuple[str, str] | None:
    """Whether the model states and activations fit in one GPU (see `memory_use`): refused
    only beyond the estimate's uncertainty (memory.MEMORY_UNCERTAINTY of the GPU's memory);
    within it the configuration runs and `memory_warning` says so."""
    cluster = scenario.cluster
    use = memory_use(scenario)
    if use.fits:
        return None
    return (
        "parallelism",
        f"model states and activations need {use.total_GB:.1f} GB per GPU, more than the "
        f"{cluster.gpu_spec.name}'s {use.capacity_GB:g} GB by {-use.margin_GB:.1f} GB, beyond "
        f"the estimate's uncertainty of {use.uncertainty_GB:.1f} GB: {_memory_parts(scenario, use)}"
        "; raise tensor or pipeline, zero_stage, or set recompute: full",
    )


def memory_warning(scenario: Scenario) -> str | None:
    """A warning when the memory estimate is within its uncertainty of the GPU's memory (the
    configuration runs, but may or may not fit), naming the margin; None otherwise."""
    use = memory_use(scenario)
    if not use.near_limit:
        return None
    where = (
        f"{-use.margin_GB:.1f} GB more than"
        if use.margin_GB < 0
        else f"{use.margin_GB:.1f} GB less than"
    )
    return (
        f"the memory estimate, {use.total_GB:.1f} GB per GPU, is {where} the "
        f"{scenario.cluster.gpu_spec.name}'s {use.capacity_GB:g} GB, within the estimate's "
        f"uncertainty of {use.uncertainty_GB:.1f} GB ({MEMORY_UNCERTAINTY:.0%} of its memory): it may "
        f"or may not fit ({_memory_parts(scenario, use)})"
    )


def _memory_parts(scenario: Scenario, use: MemoryUse) -> str:
    para, mem = scenario.parallelism, scenario.memory
    if use.activations_GB:
        interleaved = (
            f" x {use.interleave:.4g} for the interleaved schedule of virtual_stages "
            f"{para.virtual_stages}"
            if use.interleave != 1.0
            else ""
        )
        activations = (
            f"activations {use.activations_GB:.1f} (recompute {para.recompute}, "
            f"{use.in_flight:g} microbatches in flight on the first stage{interleaved})"
        )
    else:
        activations = "no activations counted (they need model.seq_len, layers and hidden)"
    return (
        f"weights {use.weights_GB:.1f} + gradients {use.gradients_GB:.1f} + optimizer "
        f"{use.optimizer_GB:.1f} ({use.bytes_per_param:.4g} bytes per parameter: "
        f"{mem.param_precision} parameters, {mem.grad_precision} gradients, zero_stage "
        f"{para.zero_stage} over {sharding_ranks(scenario):,} data-parallel ranks) + "
        + (f"ZeRO-3 buffers {use.zero3_buffers_GB:.1f} + " if use.zero3_buffers_GB else "")
        + activations
    )


def storage_problem(scenario: Scenario) -> tuple[str, str] | None:
    """Whether the checkpoint tier holds the `keep_last` checkpoints kept (key path,
    message), or None."""
    checkpoint, tier = scenario.checkpoint, scenario.storage.checkpoint_tier
    checkpoint_TB = checkpoint_GB(scenario) / 1e3
    needed_TB = checkpoint_TB * checkpoint.keep_last
    if needed_TB > tier.capacity_TB:
        return (
            "storage.checkpoint_tier.capacity_TB",
            f"checkpoint.keep_last={checkpoint.keep_last} checkpoints of {checkpoint_TB:.3g} TB "
            f"need {needed_TB:.3g} TB, more than the tier's {tier.capacity_TB:.3g} TB",
        )
    return None
