"""A run in flight: from its newest durable checkpoint (N steps done after D days), the
distribution of the days still to go, P(done by a deadline) and the cost to go; with the
run's own incident log, each class's rate updated from what the run has seen.

Each class's rate (per 1,000 GPU-days) has a gamma prior centred on the scenario's rate,
worth `prior_gpu_days` of exposure; the run's k failures in E GPU-days give the conjugate
posterior Gamma(α₀ + k, β₀ + E/1000). Each replica draws its own rates from the posterior
(a Generator per replica and class from `SeedSequence(seed, spawn_key=(replica,
FORECAST_STREAM, class))`) and runs the rest of the job with its classes' lifetimes scaled
to them. Without a log nothing is drawn: the forecast is `trainsim run` of the remaining
steps, replica for replica. docs/fitting.md has the details.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from sim.data.logs import DEFAULT_CLASS, IncidentLog, read_log
from sim.engine import ReplicaPlan, build_plan, simulate_replica
from sim.engine.aging import FleetAge
from sim.model import feasibility, perf, reliability
from sim.model.scenario import load_scenario
from sim.model.scenario_set import ScenarioError, ScenarioSet
from sim.model.schema import MAX_DAYS, Scenario
from sim.runs import arguments as check
from sim.runs.montecarlo import stoppable_pool

# The posterior draws' stream id: past the engine's table (sim/engine/streams.py), so a
# forecast's rates never share a stream with a replica's own draws.
FORECAST_STREAM = 1000
PRIOR_DAYS = 7.0  # default prior weight: a week of the job's GPUs
LEVEL = 0.95
# a posterior draw of 0 (a gamma of shape << 1 underflows): the class all but never fails
MIN_MULTIPLIER = 1e-9


@dataclass(frozen=True)
class GammaRate:
    """A failure rate per 1,000 GPU-days, Gamma(shape α, rate β) with β in (1,000 GPU-days)⁻¹."""

    shape: float
    rate: float

    @property
    def mean(self) -> float:
        return self.shape / self.rate

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        q = (1 - level) / 2
        law = stats.gamma(self.shape, scale=1 / self.rate)
        return float(law.ppf(q)), float(law.ppf(1 - q))

    def doc(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "rate": self.rate,
            "mean": self.mean,
            "interval": list(self.interval()),
        }


def prior(rate_per_1k: float, weight_gpu_days: float) -> GammaRate:
    """Centred on the scenario's rate, worth `weight_gpu_days` of exposure:
    α₀ = rate · W/1000, β₀ = W/1000."""
    return GammaRate(rate_per_1k * weight_gpu_days / 1000.0, weight_gpu_days / 1000.0)


def posterior(before: GammaRate, events: int, exposure_gpu_days: float) -> GammaRate:
    """The conjugate update of a Poisson rate: Gamma(α₀ + k, β₀ + E/1000)."""
    return GammaRate(before.shape + events, before.rate + exposure_gpu_days / 1000.0)


def scenario_rate_per_1k(scenario, failure) -> float:
    """A class's rate over the whole job, per 1,000 of its GPU-days."""
    return (
        reliability.failure_rate_per_hour(failure, scenario) * 24.0 * 1000.0 / scenario.cluster.gpus
    )


@dataclass(frozen=True)
class ClassUpdate:
    name: str
    scenario_rate: float  # per 1k GPU-days
    events: int
    exposure_gpu_days: float
    prior: GammaRate
    posterior: GammaRate

    def doc(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scenario_rate_per_1k_gpu_day": self.scenario_rate,
            "events": self.events,
            "exposure_gpu_days": self.exposure_gpu_days,
            "prior": self.prior.doc(),
            "posterior": self.posterior.doc(),
        }


@dataclass
class Forecast:
    """Per replica: days still to go, total days, cost to go (a table), and summaries."""

    table: pd.DataFrame  # replica, finished, remaining_days, total_days, cost_to_go_usd
    elapsed_days: float
    deadline_days: float | None

    def summary(self) -> dict[str, Any]:
        finished = self.table[self.table["finished"]]

        def stats_of(column: str) -> dict[str, float | None]:
            values = finished[column].to_numpy(dtype=float)
            if not len(values):
                return {"mean": None, "p50": None, "p95": None}
            return {
                "mean": float(np.mean(values)),
                "p50": float(np.percentile(values, 50)),
                "p95": float(np.percentile(values, 95)),
            }

        met = None
        if self.deadline_days is not None:
            met = float(
                np.mean(self.table["finished"] & (self.table["total_days"] <= self.deadline_days))
            )
        return {
            "remaining_days": stats_of("remaining_days"),
            "total_days": stats_of("total_days"),
            "p_deadline": met,
            "cost_to_go_usd": stats_of("cost_to_go_usd"),
            "unfinished": float(1 - self.table["finished"].mean()),
        }


@dataclass
class ForecastResult:
    scenario: str
    elapsed_days: float
    done_steps: int
    total_steps: int
    replicas: int
    seed: int
    prior_gpu_days: float
    classes: list[ClassUpdate]
    forecast: Forecast  # over the posterior (the unconditional one when there is no log)
    unconditional: Forecast  # the scenario's own rates
    has_log: bool
    # what `trainsim run` of the remaining scenario would warn of (feasibility.check)
    problems: list[feasibility.Problem] = dataclasses.field(default_factory=list)

    def doc(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "elapsed_days": self.elapsed_days,
            "done_steps": self.done_steps,
            "remaining_steps": self.total_steps - self.done_steps,
            "replicas": self.replicas,
            "seed": self.seed,
            "prior_gpu_days": self.prior_gpu_days,
            "incident_log": self.has_log,
            "classes": [c.doc() for c in self.classes],
            **self.forecast.summary(),
            "unconditional": self.unconditional.summary(),
            "problems": [f"{p.where()}{p.message}" for p in self.problems],
        }


def remaining_scenario(
    scenario: str | Path, overrides: Sequence[str], done_steps: int, elapsed_days: float = 0.0
) -> tuple[ScenarioSet, int]:
    """The scenario of the steps still to run from the checkpoint at `done_steps` (its
    tokens cut to the remaining steps' batches; a fleet with `cluster.aging` the elapsed
    days older), and the whole run's total steps."""
    whole = load_scenario(scenario, list(overrides))
    aging = whole.base.cluster.aging
    if aging is not None and elapsed_days > 0:
        older = f"cluster.aging.age_days={aging.start_days + elapsed_days!r}"
        overrides = [*overrides, older]
        whole = load_scenario(scenario, overrides)
    if len(whole.points) > 1:
        raise ScenarioError(
            str(scenario), "sweep", "a forecast is of one run: drop the sweep (or --set a value)"
        )
    total = perf.total_steps(whole.base)
    if done_steps >= total:
        raise ScenarioError(
            str(scenario), "--done-steps",
            f"{done_steps:,} steps done of the run's {total:,}: nothing is left to forecast",
        )  # fmt: skip
    if done_steps == 0:
        return whole, total
    tokens = (total - done_steps) * whole.base.model.global_batch_tokens
    rest = load_scenario(scenario, [*overrides, f"model.tokens={tokens}"])
    assert perf.total_steps(rest.base) == total - done_steps
    return rest, total


def updates(
    scenario_set: ScenarioSet,
    log: IncidentLog | None,
    elapsed_days: float,
    prior_gpu_days: float,
    source: str = "--incidents",
) -> list[ClassUpdate]:
    """Each class's prior, the run's own failures of it and exposure, and its posterior."""
    scenario = scenario_set.base
    names = [f.name for f in scenario.failures]
    counts: dict[str, int] = dict.fromkeys(names, 0)
    if log is not None:
        for name, count in log.events["class"].value_counts().items():
            if name == DEFAULT_CLASS and name not in counts and len(names) == 1:
                name = names[0]  # a log without classes, a scenario of one class
            if name not in counts:
                raise ScenarioError(
                    log.source, "column class",
                    f"class {name!r} is not one of the scenario's failure classes "
                    f"({', '.join(names) or 'none'}); name each row's class as the scenario does",
                )  # fmt: skip
            counts[name] += int(count)
    exposure = scenario.cluster.gpus * elapsed_days if log is not None else 0.0
    # a fleet that ages: its node classes' exposure in the rated fleet's time (the run's
    # days so far, at the fleet's age then)
    aged = exposure
    aging = scenario.cluster.aging
    if aging is not None and elapsed_days > 0 and log is not None:
        day = 86400.0
        trend = FleetAge((aging.start_days - elapsed_days) * day, aging.rated_at_days * day,
                         aging.beta)  # fmt: skip
        aged = exposure * trend.operational(elapsed_days * day) / (elapsed_days * day)
    out = []
    for failure in scenario.failures:
        rate = scenario_rate_per_1k(scenario, failure)
        before = prior(rate, prior_gpu_days)
        node_class = failure.scope in ("gpu", "node") and failure.attributable
        seen = aged if node_class else exposure
        after = posterior(before, counts[failure.name], seen)
        out.append(ClassUpdate(failure.name, rate, counts[failure.name], seen, before, after))
    return out


def rate_multipliers(classes: list[ClassUpdate], replicas: int, seed: int) -> np.ndarray:
    """(replica, class): each replica's rate drawn from the class's posterior, over the
    scenario's rate. Replica r's draw of class c comes from its own generator."""
    out = np.ones((replicas, len(classes)))
    for c, update in enumerate(classes):
        law = update.posterior
        for r in range(replicas):
            rng = np.random.Generator(
                np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(r, FORECAST_STREAM, c)))
            )
            out[r, c] = rng.gamma(law.shape, 1.0 / law.rate) / update.scenario_rate
    return out


def scaled_plan(plan: ReplicaPlan, multipliers: np.ndarray) -> ReplicaPlan:
    """The plan with each class failing `multipliers[c]` times as often (lifetimes' means
    divided by it; the law's shape kept)."""
    classes = tuple(
        dataclasses.replace(
            fc,
            lifetime_s=dataclasses.replace(
                fc.lifetime_s, mean=fc.lifetime_s.mean / max(float(m), MIN_MULTIPLIER)
            ),
        )
        for fc, m in zip(plan.failure_classes, multipliers)
    )
    return dataclasses.replace(plan, failure_classes=classes)


def _replica_rows(
    plan: ReplicaPlan, seed: int, replicas: list[int], multipliers: np.ndarray | None
) -> list[dict]:
    rows = []
    for r in replicas:
        own = plan if multipliers is None else scaled_plan(plan, multipliers[r])
        record = simulate_replica(own, r, seed)
        rows.append(
            {
                "replica": r,
                "finished": record.finished,
                "wall_hours": record.wall_hours,
                "remaining_days": record.time_to_train_days,  # NaN: not done by the horizon
                "cost_to_go_usd": record.cost_usd,
            }
        )
    return rows


def simulate_rest(
    plan: ReplicaPlan,
    replicas: int,
    seed: int,
    elapsed_days: float,
    deadline_days: float | None,
    multipliers: np.ndarray | None = None,
    workers: int = 1,
) -> Forecast:
    """Replicas 0..R-1 of the rest of the run (each with its own rates, if given)."""
    groups = [list(range(r, replicas, workers)) for r in range(min(workers, replicas))]
    if len(groups) > 1:  # a process per group at most; Ctrl-C kills them at once
        with stoppable_pool(len(groups)) as pool:
            parts = list(
                pool.map(
                    _replica_rows,
                    [plan] * len(groups),
                    [seed] * len(groups),
                    groups,
                    [multipliers] * len(groups),
                )
            )
    else:
        parts = [_replica_rows(plan, seed, groups[0], multipliers)]
    table = pd.DataFrame([row for part in parts for row in part])
    table = table.sort_values("replica").reset_index(drop=True)
    table["total_days"] = elapsed_days + table["remaining_days"]
    table = table[
        ["replica", "finished", "remaining_days", "total_days", "cost_to_go_usd", "wall_hours"]
    ]
    return Forecast(table, elapsed_days, deadline_days)


def forecast(
    scenario: str | Path,
    elapsed_days: float,
    done_steps: int,
    incidents: str | Path | None = None,
    deadline_days: float | None = None,
    replicas: int | None = None,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    prior_gpu_days: float | None = None,
    start: str | None = None,
    workers: int = 1,
) -> ForecastResult:
    """Forecast a run in flight (see the module's docstring)."""
    here = "forecast"
    scenario = check.path(here, "scenario", scenario)
    elapsed_days = check.number(here, "elapsed_days", elapsed_days, 0.0, MAX_DAYS)
    done_steps = check.whole_number(here, "done_steps", done_steps, 0, 10**15)
    deadline_days = check.days(here, "deadline_days", deadline_days, zero=True)
    replicas, seed = check.replicas(here, replicas), check.seed(here, seed)
    workers = check.whole_number(here, "workers", workers, 1, check.MAX_WORKERS)
    overrides = check.texts(here, "overrides", overrides, "cluster.nodes=64") or []
    if prior_gpu_days is not None:
        prior_gpu_days = check.number(here, "prior_gpu_days", prior_gpu_days, 0.0, 1e12, True)
    if start is not None and incidents is None:
        raise ScenarioError(
            "--start", str(start), "the start of the run's incident log, but no log is given: "
            "add --incidents LOG, or drop --start",
        )  # fmt: skip
    rest, total = remaining_scenario(scenario, overrides, done_steps, elapsed_days)
    _check_progress(rest.base, elapsed_days, done_steps)
    problems = feasibility.check(rest)  # what cannot run is refused, as by `trainsim run`
    base = rest.base
    replicas = base.simulation.replicas if replicas is None else replicas
    seed = base.simulation.seed if seed is None else seed
    weight = base.cluster.gpus * PRIOR_DAYS if prior_gpu_days is None else prior_gpu_days
    log = None
    if incidents is not None:
        if elapsed_days <= 0:
            raise ScenarioError(
                str(incidents), "--elapsed-days", "a log of the run needs --elapsed-days > 0"
            )
        try:
            log = read_log(
                incidents,
                nodes=base.cluster.nodes,
                gpus_per_node=base.cluster.gpus_per_node,
                start=start,
                end=elapsed_days * 24.0 if start is None else _end_stamp(start, elapsed_days),
            )
        except ScenarioError as exc:
            if exc.path not in ("--point", "--replica"):
                raise
            # fit's way to pick a replica; forecast reads the log of one real run
            raise ScenarioError(
                exc.source, "--incidents", f"{exc.message.split(':')[0]}: a simulated run's "
                "log, while forecast reads the log of the one run in flight; give a log of "
                "one run (e.g. the rows of one point and replica of incidents.parquet)",
            ) from None  # fmt: skip
    classes = updates(rest, log, elapsed_days, weight)
    plan = build_plan(base)
    unconditional = simulate_rest(plan, replicas, seed, elapsed_days, deadline_days, None, workers)
    conditional = unconditional
    if log is not None:
        multipliers = rate_multipliers(classes, replicas, seed)
        conditional = simulate_rest(
            plan, replicas, seed, elapsed_days, deadline_days, multipliers, workers
        )
    return ForecastResult(
        base.name, elapsed_days, done_steps, total, replicas, seed, weight, classes,
        conditional, unconditional, log is not None, problems,
    )  # fmt: skip


def _check_progress(rest: Scenario, elapsed_days: float, done_steps: int) -> None:
    """--done-steps in --elapsed-days must not be faster than the ideal step allows (no
    failure, no checkpoint; the rest of the run has the whole run's step): a ScenarioError
    naming both and the least days they need."""
    step_s = perf.step_time_s(rest)
    least_days = done_steps * step_s / 86400.0
    if least_days > elapsed_days * (1 + 1e-9):
        raise ScenarioError(
            "--done-steps", str(done_steps), f"{done_steps:,} steps take at least "
            f"{least_days:.4g} days at the scenario's ideal step ({step_s:.4g} s, no "
            f"failure), more than --elapsed-days {elapsed_days:g}: check both (or the "
            "scenario's step model)",
        )  # fmt: skip


def _end_stamp(start: str, elapsed_days: float) -> str:
    try:
        origin = pd.Timestamp(start)
    except (TypeError, ValueError):
        raise ScenarioError("--start", str(start), "expected an ISO 8601 time") from None
    return (origin + pd.Timedelta(days=elapsed_days)).isoformat()


def expected_failures(classes: list[ClassUpdate]) -> dict[str, float]:
    """What the scenario expects of each class in the run's exposure so far."""
    return {c.name: c.scenario_rate * c.exposure_gpu_days / 1000.0 for c in classes}
