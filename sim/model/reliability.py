"""Failure rates of the job's components, class by class and together, and the
checkpoint-interval theory built on them: Young's and Daly's intervals and the
expected wall time of Daly's model, which `checkpoint.interval: young | daly` resolve
to steps."""

from __future__ import annotations

import math

from sim.model import network
from sim.model.checkpoints import (
    checkpoint_blocking_s,
    checkpoint_load_s,
    checkpoint_validate_s,
    checkpoint_write_s,
)
from sim.model.perf import HOUR_S, step_time_s, total_steps
from sim.model.schema import FailureClassConfig, Scenario


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
