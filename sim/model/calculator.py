"""The deterministic calculator (`trainsim calc`, the report's calculator): every figure
of the step model, checkpoints, failures and interval theory for one scenario
(`calculate`), and the fabric report of `trainsim fabric` (the gradient all-reduce on the
fat tree, healthy and with parts degraded or failed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sim.model import fabric, network
from sim.model.batch import data_parallel_size, microbatches
from sim.model.checkpoints import (
    checkpoint_blocking_s,
    checkpoint_GB,
    checkpoint_load_s,
    checkpoint_write_s,
)
from sim.model.memory import memory_use
from sim.model.perf import (
    DAY_S,
    HOUR_S,
    StepBreakdown,
    bubble_share,
    calibration,
    extra_step_s,
    flops_per_token,
    memory_warning,
    mfu,
    model_flops_per_gpu_step,
    model_scaling,
    step_breakdown,
    step_time_s,
    total_steps,
)
from sim.model.reliability import (
    aggregate_mtbf_hours,
    expected_wall_s,
    interval_steps,
    theory_interval_s,
)
from sim.model.scenario_set import ScenarioError
from sim.model.schema import Scenario


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
    # how the step follows the configuration (`model_scaling`): model | fixed | abstract |
    # compute_efficiency; the compute efficiency (calibrated, or given), the MFU stated at
    # the reference and where the reference differs from this configuration (mfu_at)
    mfu_scaling: str = "fixed"
    compute_efficiency: float | None = None
    reference_mfu: float | None = None
    mfu_at: dict[str, Any] | None = None
    microbatches: float | None = None  # per data-parallel replica and step
    bubble_share: float = 0.0
    memory_GB: float = 0.0  # what one GPU needs (model states and activations)
    gpu_memory_GB: float = 0.0
    tokens: float = 0.0  # trained
    effective_pflops: float = 0.0  # the whole job's model FLOPs per second, in PFLOP/s
    # FLOPs per token: 6N (the dense matmuls) + 12·L·h·T (attention); None when given
    dense_flops_per_token: float | None = None
    attention_flops_per_token: float | None = None
    # where the step's time goes: seconds by part (compute, pipeline bubble, exposed
    # data-parallel, pipeline sends, tensor-parallel, context-parallel), adding up to it
    step_parts_s: dict[str, float] | None = None
    daly_expected_cost_usd: float = 0.0  # job and spares for Daly's expected wall time
    # the best BF16 GEMM efficiency measured on this GPU, and a warning when the
    # calibration needs more
    best_gemm_efficiency: float | None = None
    efficiency_warning: str | None = None
    fitted_overlap: float | None = None  # fitted with the efficiency to measured points
    fitted_points: list[dict[str, Any]] | None = None  # where, measured, fitted
    # the memory estimate within its uncertainty of the GPU's memory: the margin, in words
    memory_warning: str | None = None
    memory_margin_GB: float = 0.0  # the GPU's memory less the estimate (negative: over)


def flops_per_token_parts(scenario: Scenario) -> tuple[float, float] | None:
    """(6N, 12·L·h·T) of `flops_per_token`, or None when model.flops_per_token gives it."""
    model = scenario.model
    if model.flops_per_token is not None:
        return None
    attention = 0.0
    if model.layers and model.hidden and model.seq_len:
        attention = 12.0 * model.layers * model.hidden * model.seq_len
    return 6.0 * model.params, attention


def efficiency_warning(scenario: Scenario) -> str | None:
    """Why the compute efficiency the step model runs at is suspect: above the best share of
    peak a BF16 dense GEMM has been measured to reach on this GPU (hardware.GpuSpec), which
    a whole step, with its attention, norms and launches, does not beat."""
    cal = calibration(scenario)
    efficiency = cal.compute_efficiency if cal else scenario.performance.compute_efficiency
    gpu = scenario.cluster.gpu_spec
    best = gpu.best_gemm_efficiency
    if efficiency is None or best is None or efficiency <= best:
        return None
    how = "calibrated to performance.mfu" if cal else "given"
    return (
        f"the compute efficiency {efficiency:.3f} ({how}) is above {best:.3f}, the best share "
        f"of peak a BF16 dense GEMM has been measured to reach on the {gpu.name}: the stated "
        "MFU is optimistic, or the model's communication is overestimated here"
    )


def calculate(scenario: Scenario) -> Calculation:
    """Every figure of the calculator for one scenario (one point of a loaded scenario)."""
    if not isinstance(scenario, Scenario):  # a library caller's slip, said in its terms
        raise ScenarioError(
            "calculate",
            "scenario",
            "expected a Scenario (one point of a loaded scenario: "
            "sim.model.scenario.load_scenario(path).base, or .points[i].scenario), not "
            + type(scenario).__name__,
        )
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
        **_calibration_fields(scenario),
        **_calculator_extras(scenario, billed_gpus),
    )


def _calculator_extras(scenario: Scenario, billed_gpus: int) -> dict[str, Any]:
    """The calculator's rows beyond the cost: tokens, cluster throughput, FLOPs per token by
    term, where the step goes, the cost with failures, the efficiency check."""
    breakdown = step_breakdown(scenario)
    parts = flops_per_token_parts(scenario)
    cal = calibration(scenario)
    peak_PFLOP_s = scenario.cluster.gpu_spec.peak_tflops / 1e3
    return {
        "tokens": scenario.model.tokens,
        "effective_pflops": mfu(scenario) * peak_PFLOP_s * scenario.cluster.gpus,
        "dense_flops_per_token": parts[0] if parts else None,
        "attention_flops_per_token": parts[1] if parts else None,
        "step_parts_s": {
            name: share * breakdown.step_s for name, share in breakdown.shares().items()
        },
        # free GPUs cost nothing, however long the run (never inf · 0)
        "daly_expected_cost_usd": billed_gpus
        * expected_wall_s(scenario)
        / HOUR_S
        * scenario.cost.gpu_hour_usd
        if scenario.cost.gpu_hour_usd
        else 0.0,
        "best_gemm_efficiency": scenario.cluster.gpu_spec.best_gemm_efficiency,
        "efficiency_warning": efficiency_warning(scenario),
        "fitted_overlap": cal.overlap if cal else None,
        "fitted_points": [
            {"where": p.where, "measured_mfu": p.measured_mfu, "fitted_mfu": p.fitted_mfu}
            for p in cal.points
        ]
        if cal and cal.points
        else None,
    }


def _calibration_fields(scenario: Scenario) -> dict[str, Any]:
    """The calculator's account of the step model: scaling, calibration, batch split, memory."""
    scaling = model_scaling(scenario)
    cal = calibration(scenario)
    para = scenario.parallelism
    m = microbatches(scenario)
    use = memory_use(scenario)
    return {
        "mfu_scaling": scaling,
        "compute_efficiency": cal.compute_efficiency
        if cal
        else scenario.performance.compute_efficiency,
        "reference_mfu": scenario.performance.mfu,
        "mfu_at": dict(cal.mfu_at) if cal else None,
        "microbatches": m,
        "bubble_share": bubble_share(para.pipeline, para.virtual_stages, m),
        "memory_GB": use.total_GB,
        "gpu_memory_GB": use.capacity_GB,
        "memory_warning": memory_warning(scenario),
        "memory_margin_GB": use.margin_GB,
    }


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
    routing: str = ""  # the flow model's routing between leaves, in words


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
    step = breakdown.step_s + extra_step_s(
        scenario, breakdown.data_parallel_s + what_if.seconds - healthy.seconds
    )
    mfu = model_flops_per_gpu_step(scenario) / (scenario.cluster.gpu_spec.peak_tflops * 1e12 * step)
    return FabricReport(
        tree,
        network.gradient_allreduce(scenario),
        what_if,
        healthy,
        breakdown,
        step,
        mfu,
        fabric.ROUTING_WORDS[scenario.network.routing],
    )
