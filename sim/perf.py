"""Deterministic performance model (pure functions, no simulation).

FLOPs per step, step time from MFU, total steps and ideal time-to-train,
checkpoint size and its write/load times, failure rates of the job's
components, and the Young/Daly checkpoint-interval theory built on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim import fabric, network
from sim.scenario import FailureClassConfig, Scenario, StorageConfig

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
    """Where one optimizer step's time goes (seconds), and the MFU that follows.

    With `mfu` given, the step time is the model FLOPs at that MFU and `compute_s`
    is what remains after the communication the fabric model exposes; with
    `compute_efficiency`, the step is built up from its parts:
    step = (compute + tensor-parallel) · (1 + (pipeline−1)/microbatches) + (1 − overlap) · DP all-reduce.
    """

    compute_s: float
    tensor_parallel_s: float
    bubble_s: float
    data_parallel_s: float  # the whole gradient all-reduce
    exposed_data_parallel_s: float
    step_s: float
    mfu: float
    collective: str  # ring | tree, as chosen for the gradient all-reduce


# Healthy gradient all-reduce times from the flow model, by fabric configuration: a memo of
# a pure function (not state): the same inputs always give the same seconds.
_DP_ALLREDUCE_S: dict[tuple, float] = {}


def gradient_allreduce_s(scenario: Scenario) -> float:
    """The gradient all-reduce on the healthy fabric, from the SimPy flow model (it sees
    placement and oversubscription; on a non-blocking tree it equals the α–β ring)."""
    key = (scenario.model.params, scenario.cluster, scenario.parallelism, scenario.network)
    if key not in _DP_ALLREDUCE_S:
        size = network.gradient_bytes_per_rank(scenario)
        _DP_ALLREDUCE_S[key] = float(fabric.simulate_collective(scenario, size).seconds)
    return _DP_ALLREDUCE_S[key]


def step_breakdown(scenario: Scenario) -> StepBreakdown:
    perf_cfg, para = scenario.performance, scenario.parallelism
    peak = scenario.cluster.gpu_spec.peak_tflops * 1e12
    flops = model_flops_per_gpu_step(scenario)
    dp = network.gradient_allreduce(scenario)
    dp_s = gradient_allreduce_s(scenario) if perf_cfg.compute_efficiency is not None else dp.seconds
    exposed = (1.0 - perf_cfg.overlap) * dp_s
    bubble_share = (para.pipeline - 1) / para.microbatches if para.microbatches else 0.0
    if perf_cfg.mfu is not None:
        step = flops / (peak * perf_cfg.mfu)
        tp = (
            network.tensor_parallel_s(scenario)
            if (para.tensor == 1 or scenario.model.layers)
            else 0.0
        )
        busy = max(0.0, step - exposed) / (1.0 + bubble_share)
        compute = max(0.0, busy - tp)
        return StepBreakdown(
            compute, tp, busy * bubble_share, dp_s, exposed, step, perf_cfg.mfu, dp.algorithm
        )
    assert perf_cfg.compute_efficiency is not None
    compute = flops / (peak * perf_cfg.compute_efficiency)
    tp = network.tensor_parallel_s(scenario)
    bubble = (compute + tp) * bubble_share
    step = compute + tp + bubble + exposed
    return StepBreakdown(
        compute, tp, bubble, dp_s, exposed, step, flops / (peak * step), dp.algorithm
    )


def step_time_s(scenario: Scenario) -> float:
    """Nominal step time of the full job: from MFU directly, or built from its parts."""
    if scenario.performance.mfu is not None:
        return model_flops_per_gpu_step(scenario) / (
            scenario.cluster.gpu_spec.peak_tflops * 1e12 * scenario.performance.mfu
        )
    return step_breakdown(scenario).step_s


def mfu(scenario: Scenario) -> float:
    """The scenario's MFU: given, or derived from the step breakdown."""
    return (
        scenario.performance.mfu
        if scenario.performance.mfu is not None
        else step_breakdown(scenario).mfu
    )


def gpus_per_replica(scenario: Scenario) -> int:
    return scenario.parallelism.tensor * scenario.parallelism.pipeline


def data_parallel_size(scenario: Scenario) -> int:
    return scenario.cluster.gpus // gpus_per_replica(scenario)


# --------------------------------------------------------------------------- checkpoints


def checkpoint_GB(scenario: Scenario) -> float:
    return scenario.model.params * scenario.checkpoint.state_bytes_per_param / 1e9


def tier_share_GB_s(tier_GB_s: float, background_load: float) -> float:
    """What other tenants leave of a tier's bandwidth."""
    return tier_GB_s * (1.0 - background_load)


def storage_GB_s(tier_GB_s: float, nodes: int, client_GB_s_per_node: float) -> float:
    """What `nodes` nodes get from a tier that offers `tier_GB_s`: the tier, or their own
    client paths if thinner. The one place this formula lives (the engine's plan uses it)."""
    return min(tier_GB_s, nodes * client_GB_s_per_node)


def write_GB_s(storage: StorageConfig, nodes: int) -> float:
    """Checkpoint write bandwidth. Sync writes pause training, so its data reads do not compete."""
    tier = tier_share_GB_s(storage.checkpoint_tier.write_GB_s, storage.background_load)
    return storage_GB_s(tier, nodes, storage.client_GB_s_per_node)


def read_GB_s(storage: StorageConfig, nodes: int) -> float:
    tier = tier_share_GB_s(storage.checkpoint_tier.read_GB_s, storage.background_load)
    return storage_GB_s(tier, nodes, storage.client_GB_s_per_node)


def checkpoint_write_s(scenario: Scenario, nodes: int | None = None) -> float:
    """A whole checkpoint to the tier: the tier's latency plus size / write bandwidth."""
    nodes = scenario.cluster.nodes if nodes is None else nodes
    latency = scenario.storage.checkpoint_tier.latency_ms / 1e3
    return latency + checkpoint_GB(scenario) / write_GB_s(scenario.storage, nodes)


def checkpoint_load_s(scenario: Scenario, nodes: int | None = None) -> float:
    nodes = scenario.cluster.nodes if nodes is None else nodes
    latency = scenario.storage.checkpoint_tier.latency_ms / 1e3
    return latency + checkpoint_GB(scenario) / read_GB_s(scenario.storage, nodes)


def backup_copy_s(scenario: Scenario) -> float:
    """Copying one checkpoint to the backup tier (it runs in the background)."""
    backup = scenario.storage.backup
    assert backup is not None
    return backup.latency_ms / 1e3 + checkpoint_GB(scenario) / backup.write_GB_s


def backup_restore_s(scenario: Scenario) -> float:
    """Loading a checkpoint back from the backup tier (limited by the job's client paths too)."""
    backup = scenario.storage.backup
    assert backup is not None
    bandwidth = storage_GB_s(
        backup.read_GB_s, scenario.cluster.nodes, scenario.storage.client_GB_s_per_node
    )
    return backup.latency_ms / 1e3 + checkpoint_GB(scenario) / bandwidth


def snapshot_s(scenario: Scenario, nodes: int | None = None) -> float:
    """Async: the device-to-host copy of a node's share of the state (the part that blocks)."""
    nodes = scenario.cluster.nodes if nodes is None else nodes
    return checkpoint_GB(scenario) / nodes / scenario.checkpoint.snapshot_GB_s_per_node


def checkpoint_validate_s(scenario: Scenario) -> float:
    """Reading a checkpoint back to validate it (`checkpoint.validate`), else 0."""
    return checkpoint_load_s(scenario) if scenario.checkpoint.validate_writes else 0.0


def checkpoint_blocking_s(scenario: Scenario) -> float:
    """What a checkpoint costs training: the write and its validation (sync) or the
    snapshot (async: the write and validation drain in the background)."""
    if scenario.checkpoint.mode == "async":
        return snapshot_s(scenario)
    return checkpoint_write_s(scenario) + checkpoint_validate_s(scenario)


# --------------------------------------------------------------------------- failures


def components(failure: FailureClassConfig, scenario: Scenario) -> int:
    """How many independent components of this class the full job uses: its GPUs, its
    nodes, the job itself, the fabric's inter-switch cables, or its switches."""
    if failure.scope == "link":
        tree = network.scenario_fat_tree(scenario)
        return tree.cables - tree.endpoints
    if failure.scope == "switch":
        return network.scenario_fat_tree(scenario).switches
    return {"gpu": scenario.cluster.gpus, "node": scenario.cluster.nodes, "job": 1, "storage": 1}[
        failure.scope
    ]


def gpus_per_component(failure: FailureClassConfig, scenario: Scenario) -> float:
    if failure.scope in ("link", "switch"):
        return scenario.cluster.gpus / components(failure, scenario)
    return {
        "gpu": 1,
        "node": scenario.cluster.gpus_per_node,
        "job": scenario.cluster.gpus,
        "storage": scenario.cluster.gpus,
    }[failure.scope]


def component_mtbf_hours(failure: FailureClassConfig, scenario: Scenario) -> float:
    """Mean time between failures of one component (a GPU, a node, or the job).

    `rate_per_1k_gpu_day` is fleet-normalised: a component covering g GPUs fails
    at rate·g/1000 per day.
    """
    if failure.mtbf_hours is not None:
        return failure.mtbf_hours
    assert failure.rate_per_1k_gpu_day is not None
    per_day = failure.rate_per_1k_gpu_day * gpus_per_component(failure, scenario) / 1000.0
    return 24.0 / per_day


def failure_rate_per_hour(failure: FailureClassConfig, scenario: Scenario) -> float:
    """Long-run failure rate of the full job from this class (renewal rate)."""
    return components(failure, scenario) / component_mtbf_hours(failure, scenario)


def aggregate_mtbf_hours(scenario: Scenario) -> float:
    """Mean time between failures of the whole job, all classes together (inf if none)."""
    rate = sum(failure_rate_per_hour(f, scenario) for f in scenario.failures)
    return math.inf if rate == 0 else 1.0 / rate


# --------------------------------------------------------------------------- interval theory


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young (1974): compute time between checkpoints τ ≈ sqrt(2·δ·M)."""
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly (2006) higher-order optimum of the compute time between checkpoints."""
    delta, m = checkpoint_s, mtbf_s
    if delta >= 2.0 * m:
        return m
    x = delta / (2.0 * m)
    return math.sqrt(2.0 * delta * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta


def daly_expected_wall_s(
    ideal_s: float, interval_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float
) -> float:
    """Daly's exact expected wall time with exponential failures and restart R:
    E[T] = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·Ts/τ."""
    m = mtbf_s
    if (restart_s + interval_s + checkpoint_s) / m > 700.0:  # e^700 ~ 1e304: never finishes
        return math.inf
    return (
        m
        * math.exp(restart_s / m)
        * math.expm1((interval_s + checkpoint_s) / m)
        * ideal_s
        / interval_s
    )


def restart_s(scenario: Scenario) -> float:
    """Restart of the full job: requeue/launch/NCCL init plus the checkpoint load."""
    return scenario.recovery.restart_minutes * 60.0 + checkpoint_load_s(scenario)


def theory_interval_s(scenario: Scenario, theory: str) -> float:
    """Young's or Daly's compute time between checkpoints for this scenario: the blocking
    cost of its mode against the job's aggregate MTBF; an async interval is no shorter
    than the drain of the previous checkpoint. Infinite without failures."""
    mtbf_s = aggregate_mtbf_hours(scenario) * HOUR_S
    if math.isinf(mtbf_s):
        return math.inf
    formula = young_interval_s if theory == "young" else daly_interval_s
    seconds = formula(checkpoint_blocking_s(scenario), mtbf_s)
    if scenario.checkpoint.mode == "async":
        seconds = max(seconds, checkpoint_write_s(scenario))
    return seconds


def expected_wall_s(scenario: Scenario) -> float:
    """Daly's expected wall time for this scenario, to first order: exponential failures at
    the aggregate rate, a restart of `restart_s`, and the checkpoint's blocking cost (the
    write when sync, the snapshot when async; an async run also waits for its last drain).
    Detection, node waits and repairs are not in it: Monte Carlo adds them."""
    step_s = step_time_s(scenario)
    steps = total_steps(scenario)
    ideal_s = steps * step_s
    interval_s = interval_steps(scenario) * step_s
    blocking_s = checkpoint_blocking_s(scenario)
    final_drain_s = (
        checkpoint_write_s(scenario) + checkpoint_validate_s(scenario)
        if scenario.checkpoint.mode == "async"
        else 0.0
    )
    mtbf_s = aggregate_mtbf_hours(scenario) * HOUR_S
    if math.isinf(mtbf_s):
        return ideal_s + math.ceil(steps / interval_steps(scenario)) * blocking_s + final_drain_s
    return (
        daly_expected_wall_s(ideal_s, interval_s, blocking_s, restart_s(scenario), mtbf_s)
        + final_drain_s
    )


def interval_steps(scenario: Scenario) -> int:
    """Steps between checkpoints, resolving minutes and young | daly into steps."""
    ckpt = scenario.checkpoint
    if ckpt.interval_steps is not None:
        return ckpt.interval_steps
    step_s = step_time_s(scenario)
    if ckpt.interval_minutes is not None:
        seconds = ckpt.interval_minutes * 60.0
    else:
        assert ckpt.interval is not None
        seconds = theory_interval_s(scenario, ckpt.interval)
        if math.isinf(seconds):
            return total_steps(scenario)  # no failures: only the final checkpoint is worth writing
    return max(1, min(total_steps(scenario), round(seconds / step_s)))


# --------------------------------------------------------------------------- calculator


@dataclass(frozen=True)
class Calculation:
    """The deterministic calculator's answer for one scenario (what `trainsim calc` prints)."""

    gpus: int
    data_parallel_size: int
    flops_per_token: float
    total_steps: int
    step_time_s: float
    tokens_per_s: float
    mfu: float
    effective_tflops_per_gpu: float
    ideal_days: float
    checkpoint_GB: float
    checkpoint_mode: str
    checkpoint_write_s: float
    checkpoint_blocking_s: float  # what a checkpoint stops training for: the write, or the snapshot
    checkpoint_load_s: float
    checkpoint_storage_TB: float
    interval_steps: int
    interval_minutes: float
    aggregate_mtbf_hours: float
    failures_per_day: float
    young_interval_minutes: float
    daly_interval_minutes: float
    daly_expected_days: float
    ideal_gpu_hours: float
    ideal_cost_usd: float
    gpu_hour_usd: float
    cost_per_1B_tokens_usd: float


def calculate(scenario: Scenario) -> Calculation:
    step_s = step_time_s(scenario)
    steps = total_steps(scenario)
    ideal_s = steps * step_s
    write_s = checkpoint_write_s(scenario)
    mtbf_h = aggregate_mtbf_hours(scenario)
    mtbf_s = mtbf_h * HOUR_S
    interval = interval_steps(scenario)
    billed_gpus = (
        scenario.cluster.nodes + scenario.cluster.spare_nodes
    ) * scenario.cluster.gpus_per_node
    ideal_gpu_hours = billed_gpus * ideal_s / HOUR_S
    cost = ideal_gpu_hours * scenario.cost.gpu_hour_usd
    finite = math.isfinite(mtbf_s)
    return Calculation(
        gpus=scenario.cluster.gpus,
        data_parallel_size=data_parallel_size(scenario),
        flops_per_token=flops_per_token(scenario),
        total_steps=steps,
        step_time_s=step_s,
        tokens_per_s=scenario.model.global_batch_tokens / step_s,
        mfu=mfu(scenario),
        effective_tflops_per_gpu=mfu(scenario) * scenario.cluster.gpu_spec.peak_tflops,
        ideal_days=ideal_s / DAY_S,
        checkpoint_GB=checkpoint_GB(scenario),
        checkpoint_mode=scenario.checkpoint.mode,
        checkpoint_write_s=write_s,
        checkpoint_blocking_s=checkpoint_blocking_s(scenario),
        checkpoint_load_s=checkpoint_load_s(scenario),
        checkpoint_storage_TB=checkpoint_GB(scenario) * scenario.checkpoint.keep_last / 1e3,
        interval_steps=interval,
        interval_minutes=interval * step_s / 60.0,
        aggregate_mtbf_hours=mtbf_h,
        failures_per_day=24.0 / mtbf_h if finite else 0.0,
        young_interval_minutes=theory_interval_s(scenario, "young") / 60.0,
        daly_interval_minutes=theory_interval_s(scenario, "daly") / 60.0,
        daly_expected_days=expected_wall_s(scenario) / DAY_S,
        ideal_gpu_hours=ideal_gpu_hours,
        ideal_cost_usd=cost,
        gpu_hour_usd=scenario.cost.gpu_hour_usd,
        cost_per_1B_tokens_usd=cost / (scenario.model.tokens / 1e9),
    )


# --------------------------------------------------------------------------- fabric effects


@dataclass(frozen=True)
class FabricReport:
    """What `trainsim fabric` prints: sizing, the gradient all-reduce both ways, the step."""

    tree: network.FatTree
    analytic: network.CollectiveCost
    simulated: fabric.FabricResult  # with the what-if degradations applied
    healthy_simulated: fabric.FabricResult
    breakdown: StepBreakdown  # healthy fabric
    step_s: float  # with the what-ifs: the extra exposed all-reduce time added
    mfu: float


def fabric_report(
    scenario: Scenario,
    degrade: dict[str, float] | None = None,
    failed_switches: set[str] | None = None,
) -> FabricReport:
    size = network.gradient_bytes_per_rank(scenario)
    tree = network.scenario_fat_tree(scenario)
    healthy = fabric.simulate_collective(scenario, size)
    what_if = (
        fabric.simulate_collective(scenario, size, degrade=degrade, failed_switches=failed_switches)
        if (degrade or failed_switches)
        else healthy
    )
    breakdown = step_breakdown(scenario)
    step = breakdown.step_s + (1.0 - scenario.performance.overlap) * (
        what_if.seconds - healthy.seconds
    )
    mfu = model_flops_per_gpu_step(scenario) / (scenario.cluster.gpu_spec.peak_tflops * 1e12 * step)
    return FabricReport(
        tree, network.gradient_allreduce(scenario), what_if, healthy, breakdown, step, mfu
    )
