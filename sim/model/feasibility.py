"""Scenarios that pass the schema but cannot give an answer: checks that need the
performance model, run before anything is simulated.

- A horizon shorter than the ideal time to train: no replica can finish.
- Failures so frequent that the job could not complete one step between them, or
  that a replica would make millions of failure events before its horizon; the same
  bound for straggler onsets (with the failures).
- Replicas beyond what a run accepts (`check_replicas`: the CLI calls it with the
  effective --replicas before anything is written).
`check` raises a `ScenarioError` when every point is affected (or any point has
impossible failure rates) and returns per-point warnings otherwise.
- A memory estimate within its uncertainty of the GPU's memory (`memory_warnings`): the
  point runs, and the warning names the margin.

A sweep point the loader marked `infeasible` (a configuration that cannot run: the batch
does not divide, too few microbatches, the model does not fit) is left out of these
checks: it is never simulated, and its row says why. A sweep none of whose points can
run is refused, with every point's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.model import perf, reliability
from sim.model.scenario_set import ScenarioError, ScenarioSet
from sim.model.schema import MAX_REPLICAS, MAX_RUN_REPLICAS, Scenario

# Failure events one replica may make up to its horizon. The engine handles a failure in
# tens of microseconds, so this is about a minute of CPU per replica; a real scenario
# (16k GPUs, a year) stays two orders of magnitude below it.
FAILURE_BUDGET = 1_000_000


@dataclass(frozen=True)
class Problem:
    """Why one sweep point cannot give an answer."""

    point: int
    params: dict[str, Any]
    key: str  # the key path at fault
    message: str
    fatal: bool  # refused outright even when other points are fine

    def where(self) -> str:
        return (f"sweep point {self.params}: " if self.params else "") + f"{self.key}: "


def horizon_problem(scenario: Scenario) -> str | None:
    ideal_days = perf.total_steps(scenario) * perf.step_time_s(scenario) / perf.DAY_S
    horizon = scenario.simulation.horizon_days
    if horizon < ideal_days and scenario.simulation.until == "finished":
        return (
            f"{horizon:g} days is shorter than the ideal time to train "
            f"({ideal_days:.2f} days without failures or checkpoints), so no replica can finish; "
            f"raise simulation.horizon_days above {ideal_days:.2f}"
        )
    return None


def failure_rate_problem(scenario: Scenario) -> tuple[str, str] | None:
    """(key path, message) when the failure classes strike faster than the job can step,
    or would make more than FAILURE_BUDGET events in one replica."""
    if not scenario.failures:
        return None
    rates = [reliability.failure_rate_per_hour(f, scenario) for f in scenario.failures]
    total_per_hour = sum(rates)
    worst = max(range(len(rates)), key=rates.__getitem__)
    failure = scenario.failures[worst]
    key = f"failures.{worst}." + (
        "mtbf_hours" if failure.mtbf_hours is not None else "rate_per_1k_gpu_day"
    )
    mtbf_s = perf.HOUR_S / total_per_hour
    step_s = perf.step_time_s(scenario)
    if mtbf_s < step_s:
        return key, (
            f"the failure classes together strike every {mtbf_s:.3g} s on this job "
            f"(class {failure.name!r} alone {perf.HOUR_S / rates[worst]:.3g} s), shorter than "
            f"one training step of {step_s:.3g} s: the job could never make progress; "
            "check the rate's unit (mtbf_hours is per component, rate_per_1k_gpu_day per 1,000 GPUs)"
        )
    events = total_per_hour * scenario.simulation.horizon_days * 24.0
    if events > FAILURE_BUDGET:
        return key, (
            f"about {events:,.0f} failures would strike one replica within "
            f"simulation.horizon_days={scenario.simulation.horizon_days:g} "
            f"(one every {mtbf_s:.3g} s), more than the {FAILURE_BUDGET:,} a replica may make; "
            "check the rate's unit, or shorten simulation.horizon_days"
        )
    return None


def straggler_onsets_per_day(scenario: Scenario) -> float:
    """Straggler onsets the engine draws per day of one replica (0 without stragglers): the
    rate over the job's GPUs, at the faulty rate when nodes can carry a lasting fault (the
    engine thins candidates drawn at `lemon_rate_multiplier` x the rate)."""
    stragglers = scenario.stragglers
    if stragglers is None:
        return 0.0
    gpus = scenario.cluster.nodes * scenario.cluster.gpus_per_node
    rate = stragglers.rate_per_1k_gpu_day * gpus / 1000.0
    faults = scenario.cluster.lemon_fraction > 0 or any(f.fault_prob > 0 for f in scenario.failures)
    if stragglers.node_attributable and faults:
        rate *= scenario.cluster.lemon_rate_multiplier
    return rate


def event_problem(scenario: Scenario) -> tuple[str, str] | None:
    """(key path, message) when stragglers, with the failures, would make more than
    FAILURE_BUDGET events in one replica before its horizon (the engine handles each
    onset, clearing and drain as it handles a failure)."""
    onsets_per_day = straggler_onsets_per_day(scenario)
    if onsets_per_day == 0:
        return None
    horizon = scenario.simulation.horizon_days
    failures_per_day = 24.0 * sum(
        reliability.failure_rate_per_hour(f, scenario) for f in scenario.failures
    )
    onsets = onsets_per_day * horizon
    events = onsets + failures_per_day * horizon
    if events <= FAILURE_BUDGET:
        return None
    gpus = scenario.cluster.nodes * scenario.cluster.gpus_per_node
    failures = f" and about {failures_per_day * horizon:,.0f} failures" if failures_per_day else ""
    return "stragglers.rate_per_1k_gpu_day", (
        f"about {onsets:,.0f} straggler onsets{failures} would strike one replica within "
        f"simulation.horizon_days={horizon:g} ({_amount(onsets_per_day)} a day on {gpus:,} GPUs), "
        f"more than the {FAILURE_BUDGET:,} events a replica may make: the replica would run "
        "for hours. The rate is per 1,000 GPU-days (0.3 is typical); lower it, or shorten "
        "simulation.horizon_days"
    )


def problems(scenario_set: ScenarioSet) -> list[Problem]:
    found = []
    for point in scenario_set.feasible:
        rate = failure_rate_problem(point.scenario) or event_problem(point.scenario)
        if rate is not None:
            found.append(Problem(point.index, point.params, rate[0], rate[1], fatal=True))
        horizon = horizon_problem(point.scenario)
        if horizon is not None:
            found.append(
                Problem(point.index, point.params, "simulation.horizon_days", horizon, fatal=False)
            )
    return found


def memory_warnings(scenario_set: ScenarioSet) -> list[Problem]:
    """The points that can run whose memory estimate is within its uncertainty of the GPU's
    memory (`perf.memory_warning`): they run, and may or may not fit; not fatal."""
    found = []
    for point in scenario_set.feasible:
        warning = perf.memory_warning(point.scenario)
        if warning is not None:
            found.append(Problem(point.index, point.params, "parallelism", warning, fatal=False))
    return found


def check(scenario_set: ScenarioSet) -> list[Problem]:
    """Raise for what cannot run at all; return the points no replica of which can finish."""
    infeasible_everywhere(scenario_set)
    found = problems(scenario_set)
    for problem in found:
        if problem.fatal:
            at = f"at sweep point {problem.params}: " if problem.params else ""
            raise ScenarioError(scenario_set.source, problem.key, at + problem.message)
    hopeless = [p for p in found if p.key == "simulation.horizon_days"]
    if hopeless and len(hopeless) == len(scenario_set.feasible):
        first = hopeless[0]
        every = ""
        if len(scenario_set.points) > 1:
            every = (
                " (at every sweep point)"
                if len(hopeless) == len(scenario_set.points)
                else " (at every sweep point that is not infeasible)"
            )
        raise ScenarioError(scenario_set.source, first.key, first.message + every)
    return hopeless


def infeasible_everywhere(scenario_set: ScenarioSet) -> None:
    """Raise a ScenarioError, naming each point's reason, when no point can run."""
    if scenario_set.feasible:
        return
    shown = "; ".join(
        f"{_params(p.params)}: {p.infeasible}" if p.params else str(p.infeasible)
        for p in scenario_set.points[:MAX_REASONS]
    )
    more = len(scenario_set.points) - MAX_REASONS
    if more > 0:
        shown += f"; and {more} more"
    every = "every sweep point is infeasible" if len(scenario_set.points) > 1 else "infeasible"
    raise ScenarioError(scenario_set.source, "", f"{every}, so nothing can run: {shown}")


MAX_REASONS = 6  # infeasible points an error message names one by one


def _amount(value: float) -> str:
    """128,000 for a large number, 0.0384 for a small one."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def check_replicas(
    scenario_set: ScenarioSet,
    replicas: int | None,
    points: range | None = None,
    option: str = "--replicas",
) -> int:
    """The replicas a run would simulate (the replicas times the points that can run, in
    `points` when a slice is given); raise a ScenarioError when that is more than
    MAX_REPLICAS per point or MAX_RUN_REPLICAS in all: refused at once, before the
    replicas are even counted out."""
    count = scenario_set.base.simulation.replicas if replicas is None else replicas
    if count > MAX_REPLICAS:
        raise ScenarioError(
            option,
            f"{count:,}",
            f"at most {MAX_REPLICAS:,} replicas per sweep point (enough for a mean known "
            "to ±0.2% of the replicas' spread at 95%); run fewer",
        )
    runnable = [p for p in scenario_set.feasible if points is None or p.index in points]
    total = count * len(runnable)
    if total > MAX_RUN_REPLICAS:
        raise ScenarioError(
            option,
            f"{count:,}",
            f"{count:,} replicas x {len(runnable):,} sweep points = {total:,} replicas, more "
            f"than the {MAX_RUN_REPLICAS:,} one run accepts; run fewer replicas, or the sweep "
            "in slices (run --points I:J, then trainsim merge)",
        )
    return total


def metric_problem(scenario_set: ScenarioSet, metric: str) -> str | None:
    """Why `metric` would have no value to compare at some point that can run (optimize
    compares the replicas that have a value at every point), or None: known before
    anything is simulated."""
    if metric == "backup_lag_hours":
        bare = [p for p in scenario_set.feasible if p.scenario.storage.backup is None]
        if bare:
            return (
                f"backup_lag_hours has no value without a backup tier (storage.backup), and "
                f"{_where(bare, len(scenario_set.feasible))} has none: choose another --metric, "
                "or give storage.backup"
            )
    if metric == "time_to_train_days":
        hopeless = [p for p in scenario_set.feasible if horizon_problem(p.scenario)]
        if hopeless:
            return (
                f"time_to_train_days has no value where no replica can finish: "
                f"{_where(hopeless, len(scenario_set.feasible))} cannot finish within "
                "simulation.horizon_days; raise it, or drop those values"
            )
    return None


def _where(points: list, total: int) -> str:
    if len(points) == 1 and total == 1:
        return "the scenario"
    if len(points) == total:
        return "every point"
    return "the point " + "; the point ".join(_params(p.params) for p in points[:MAX_REASONS])
