"""Planning under a deadline: the configuration of a grid that minimises (or maximises) an
objective subject to P(time to train <= deadline) >= quantile, found by racing the points.

Every point starts with a small batch of replicas; round by round the batch doubles for the
points still in the race. A point leaves it when it is clearly infeasible (the upper 95%
Wilson bound of its P(meet) is below the quantile) or clearly dominated (its paired
difference to the best clearly feasible point has a 95% CI above zero). Replica r is the
same at every point (common random numbers), which is what makes paired differences tight.
`judge` is the elimination rule as a pure function; `race` runs the rounds on any evaluator;
`plan` runs them on the Monte Carlo and writes a run directory with plan.json.

A point whose configuration cannot run (`Point.infeasible`: the batch does not divide, the
model does not fit, ...) never enters the race: it is a candidate with status infeasible,
no replica, and that reason (a point that ran and misses the deadline has the reason
MISSES_DEADLINE). A grid none of whose points can run is refused before anything runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from sim.decide import analysis
from sim.model import feasibility
from sim.model.columns import better_direction
from sim.model.scenario import Point, ScenarioError, ScenarioSet, load_scenario
from sim.runs import summaries
from sim.runs.api import RunInterrupted, finalise, part_check
from sim.runs.dask_executor import SchedulerLost, check_scheduler_option
from sim.runs.files import finite, write_regular
from sim.runs.manifest import read_manifest
from sim.runs.montecarlo import Interrupted, default_workers
from sim.runs.montecarlo import _ignore_for_a_while as ignore_for_a_while
from sim.runs.montecarlo import run as run_montecarlo
from sim.runs.progress import PlainProgress, TimeColumn, progress_display
from sim.runs.results import RunDir, TableOfRun

# draws a plan's figure from plan.json (`sim.show.plan_plots.pareto_figure`)
ParetoFigure = Callable[[dict[str, Any]], Figure]

FIRST_REPLICAS = 32  # every point's first batch
MAX_REPLICAS = 512  # a point never gets more
PRECISION = 0.001  # points within ±0.1% of the incumbent's objective are as good as tied
Z95 = 1.959963984540054  # two-sided 95%: each bound alone is one-sided 97.5%
STATUSES = ("chosen", "feasible", "unproven", "infeasible", "dominated")
MISSES_DEADLINE = "misses the deadline"  # the reason of an infeasible point that ran

# What the race reads of each replica (the rest of the row goes to the run directory only).
RACE_COLUMNS = ["point", "replica", "error", "finished", "time_to_train_days", "cost_usd"]


# --------------------------------------------------------------------------- statistics


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (0, 1 when there is no trial). Unlike
    the normal interval it stays inside [0, 1] and is not empty when every trial succeeds."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


@dataclass(frozen=True)
class Sample:
    """The replicas of one point run so far (error rows left out), in replica order."""

    replicas: np.ndarray  # replica ids, ascending
    met: np.ndarray  # bool: finished within the deadline
    objective: np.ndarray  # float; NaN where a replica has no value (time of an unfinished one)

    @property
    def n(self) -> int:
        return int(self.replicas.size)

    @property
    def p_meet(self) -> float:
        return float(self.met.mean()) if self.n else math.nan

    def p_meet_interval(self, z: float = Z95) -> tuple[float, float]:
        return wilson_interval(int(self.met.sum()), self.n, z)

    @property
    def objective_mean(self) -> float:
        values = self.objective[np.isfinite(self.objective)]
        return float(values.mean()) if values.size else math.nan

    def objective_ci(self) -> tuple[float, float]:
        """95% t interval of the objective's mean (NaN with fewer than two values)."""
        values = self.objective[np.isfinite(self.objective)]
        if values.size < 2:
            return math.nan, math.nan
        mean = float(values.mean())
        t = analysis.student_t_quantile(0.975, values.size - 1)
        half = t * float(values.std(ddof=1)) / math.sqrt(values.size)
        return mean - half, mean + half


def samples_of(table: pd.DataFrame, deadline_days: float, objective: str) -> dict[int, Sample]:
    """One Sample per point of a replica table (columns: point, replica, error, finished,
    time_to_train_days and the objective). Unfinished replicas miss the deadline."""
    ok = table[table["error"] == ""] if "error" in table else table
    samples = {}
    for point, rows in ok.groupby("point", sort=True):
        rows = rows.sort_values("replica")
        days = rows["time_to_train_days"].to_numpy(dtype=float, na_value=np.nan)
        met = rows["finished"].to_numpy(dtype=bool) & (days <= deadline_days)
        values = rows[objective].to_numpy(dtype=float, na_value=np.nan)
        samples[int(point)] = Sample(rows["replica"].to_numpy(dtype=np.int64), met, values)
    return samples


def paired_difference(worse: Sample, best: Sample, direction: str) -> tuple[float, float, float]:
    """How much worse `worse` is than `best` in the objective (positive: worse), with a 95%
    t interval, pairing replica by replica over the replicas both have a value for (the
    interval is NaN with fewer than two pairs)."""
    _, i, j = np.intersect1d(worse.replicas, best.replicas, return_indices=True)
    sign = -1.0 if direction == "max" else 1.0
    x, y = sign * worse.objective[i], sign * best.objective[j]
    keep = np.isfinite(x) & np.isfinite(y)
    difference = analysis.paired_difference(y[keep], x[keep])  # mean(x - y)
    return difference.estimate, difference.low, difference.high


def quantile_days(sample_days: np.ndarray, finished: np.ndarray, q: float) -> float:
    """The q-quantile of time to train with unfinished replicas never finishing (inf): an
    order statistic (inverted CDF), so that P(meet) >= q exactly when it is <= the deadline."""
    if sample_days.size == 0:
        return math.nan
    days = np.where(finished, sample_days, np.inf)
    return float(np.quantile(days, q, method="inverted_cdf"))


# --------------------------------------------------------------------------- the rule


@dataclass(frozen=True)
class Verdict:
    """What one round's evidence says about the points still in the race."""

    infeasible: frozenset[int]  # the upper bound of P(meet) is below the quantile
    dominated: frozenset[int]  # worse than the incumbent, paired 95% CI above zero
    incumbent: int | None  # the clearly feasible point with the best objective mean
    settled: bool  # every other point left is within ±precision of the incumbent


def judge(
    samples: Mapping[int, Sample],
    quantile: float,
    direction: str,
    precision: float = PRECISION,
    z: float = Z95,
) -> Verdict:
    """The elimination rule, a pure function of the points' samples so far.

    A point is clearly feasible when the lower Wilson bound of its P(meet) is at least the
    quantile, clearly infeasible when the upper bound is below it. The incumbent is the
    clearly feasible point with the best objective mean; a point whose paired difference
    to it has a CI entirely above zero (worse) is dominated. The race is settled when there
    is an incumbent and every other point left has its paired difference known to lie
    within ±precision × |incumbent mean| (nothing left to find at that precision).
    """
    sign = -1.0 if direction == "max" else 1.0
    bounds = {p: s.p_meet_interval(z) for p, s in samples.items()}
    infeasible = frozenset(p for p, (_, high) in bounds.items() if high < quantile)
    feasible = [p for p, (low, _) in bounds.items() if low >= quantile]
    scored = [p for p in feasible if math.isfinite(samples[p].objective_mean)]
    if not scored:
        return Verdict(infeasible, frozenset(), None, False)
    incumbent = min(scored, key=lambda p: (sign * samples[p].objective_mean, p))
    tolerance = precision * abs(samples[incumbent].objective_mean)
    dominated, settled = set(), True
    for point, sample in samples.items():
        if point == incumbent or point in infeasible:
            continue
        _, low, high = paired_difference(sample, samples[incumbent], direction)
        if low > 0:
            dominated.add(point)
        elif not (low >= -tolerance and high <= tolerance):  # NaN (too few pairs): not settled
            settled = False
    return Verdict(infeasible, frozenset(dominated), incumbent, settled)


# --------------------------------------------------------------------------- the race

# Runs replicas [start, stop) of the given points; returns their rows (RACE_COLUMNS at least).
Evaluate = Callable[[list[int], int, int], pd.DataFrame]


@dataclass(frozen=True)
class Round:
    number: int  # from 1
    points: int  # in the race during this round
    replicas: int  # each of them has after it
    infeasible: list[int]  # dropped at its end
    dominated: list[int]


@dataclass
class Race:
    """The race's evidence and course: every evaluated row and who left when."""

    rows: pd.DataFrame
    rounds: list[Round]
    dropped: dict[int, tuple[str, int]]  # point -> (status, round)
    active: list[int]  # still in the race at the end
    verdict: Verdict  # of the last round
    stop_reason: str


def race(
    points: Sequence[int],
    evaluate: Evaluate,
    deadline_days: float,
    quantile: float,
    objective: str,
    direction: str,
    first: int = FIRST_REPLICAS,
    most: int = MAX_REPLICAS,
    precision: float = PRECISION,
    on_round: Callable[[Round], None] | None = None,
) -> Race:
    """Successive halving of the grid: every point gets `first` replicas, then the points
    still in the race get twice as many each round (at most `most`), until the race is
    settled, at most one point is left and decided, or the budget is spent."""
    active = list(points)
    dropped: dict[int, tuple[str, int]] = {}
    rounds: list[Round] = []
    frames: list[pd.DataFrame] = []
    have, target, number = 0, min(first, most), 0
    while True:
        number += 1
        rows = evaluate(list(active), have, target)
        if len(rows) and (rows["error"] != "").all():
            first_error = rows["error"].iloc[0]
            raise RuntimeError(f"every replica of round {number} raised; the first: {first_error}")
        frames.append(rows)
        have = target
        table = pd.concat(frames, ignore_index=True)
        samples = samples_of(table[table["point"].isin(active)], deadline_days, objective)
        verdict = judge(samples, quantile, direction, precision)
        out_infeasible = sorted(p for p in active if p in verdict.infeasible)
        out_dominated = sorted(p for p in active if p in verdict.dominated)
        for point in out_infeasible:
            dropped[point] = ("infeasible", number)
        for point in out_dominated:
            dropped[point] = ("dominated", number)
        rounds.append(Round(number, len(active), have, out_infeasible, out_dominated))
        if on_round is not None:
            on_round(rounds[-1])
        active = [p for p in active if p not in dropped]
        if not active:
            reason = "no point is left: every point is clearly infeasible"
        elif verdict.settled and len(active) == 1:
            reason = "one point is left"
        elif verdict.settled:
            reason = (
                f"the points left are within ±{precision * 100:g}% of the best mean "
                "(the precision target)"
            )
        elif have >= most:
            reason = f"the points left reached the most replicas a point may get ({most})"
        else:
            target = min(most, 2 * have)
            continue
        return Race(table, rounds, dropped, active, verdict, reason)


# --------------------------------------------------------------------------- the outcome


@dataclass
class Plan(TableOfRun):
    """A finished plan: the plan.json document, the replica rows and the run directory."""

    doc: dict[str, Any]
    scenario_set: ScenarioSet
    run_dir: Path | None
    # points no replica of which can finish (the horizon is shorter than the ideal time)
    problems: list[feasibility.Problem] = field(default_factory=list)
    _table: pd.DataFrame | None = None

    @property
    def chosen(self) -> dict[str, Any] | None:
        return self.doc["chosen"]

    @property
    def candidates(self) -> pd.DataFrame:
        return pd.DataFrame(self.doc["candidates"])


def outcome(
    scenario_set: ScenarioSet,
    result: Race,
    deadline_days: float,
    quantile: float,
    objective: str,
    direction: str,
) -> dict[str, Any]:
    """The plan.json document of a finished race: the chosen point, every candidate with its
    statistics and status, the time-cost Pareto front and the replicas spent."""
    keys = scenario_set.swept_keys  # every candidate's values ...
    axes = scenario_set.varied_keys  # ... of which these vary: labels and the front
    samples = samples_of(result.rows, deadline_days, objective)
    costs = samples_of(result.rows, deadline_days, "cost_usd")
    ok = result.rows[result.rows["error"] == ""]
    sign = -1.0 if direction == "max" else 1.0

    def rank(point: int) -> tuple[float, int]:
        mean = samples[point].objective_mean
        return (sign * mean if math.isfinite(mean) else math.inf, point)

    incumbent = result.verdict.incumbent
    if incumbent is not None and incumbent in result.active:
        chosen = incumbent
    else:
        meeting = [p for p in result.active if p in samples and samples[p].p_meet >= quantile]
        chosen = min(meeting, key=rank) if meeting else None

    records = []
    for point in scenario_set.points:
        index = point.index
        if point.infeasible is not None:  # never ran: the reason, no statistic
            records.append(_cannot_run(point, keys))
            continue
        sample = samples.get(index)
        if sample is None:  # every replica of it raised
            continue
        rows = ok[ok["point"] == index]
        days = rows["time_to_train_days"].to_numpy(dtype=float, na_value=np.nan)
        finished = rows["finished"].to_numpy(dtype=bool)
        low, high = sample.objective_ci()
        p_low, p_high = sample.p_meet_interval()
        if index == chosen:
            status, dropped_round = "chosen", None
        elif index in result.dropped:
            status, dropped_round = result.dropped[index]
        elif sample.p_meet < quantile:
            status, dropped_round = "infeasible", None
        elif p_low < quantile:  # meets it by the estimate, not at 95% confidence
            status, dropped_round = "unproven", None
        else:
            status, dropped_round = "feasible", None
        difference = (math.nan,) * 3
        if chosen is not None and index != chosen:
            difference = paired_difference(sample, samples[chosen], direction)
            if status in ("feasible", "unproven") and difference[1] > 0:
                status = "dominated"  # at the end, by the chosen point (still in the race)
        records.append(
            {
                "point": index,
                **{k: point.params[k] for k in keys},
                "replicas": sample.n,
                "objective_mean": sample.objective_mean,
                "objective_ci_low": low,
                "objective_ci_high": high,
                "p_meet": sample.p_meet,
                "p_meet_low": p_low,
                "p_meet_high": p_high,
                "status": status,
                "reason": MISSES_DEADLINE if status == "infeasible" else None,
                "dropped_round": dropped_round,
                "difference_to_chosen": difference[0],
                "difference_ci_low": difference[1],
                "difference_ci_high": difference[2],
                "time_to_train_days_p50": quantile_days(days, finished, 0.50),
                "time_to_train_days_p95": quantile_days(days, finished, 0.95),
                "time_to_train_days_at_quantile": quantile_days(days, finished, quantile),
                "cost_usd_mean": costs[index].objective_mean,
                "finished_fraction": float(finished.mean()) if finished.size else math.nan,
            }
        )
    order = {status: i for i, status in enumerate(("chosen", "feasible", "unproven", "dominated"))}

    def place(r: dict[str, Any]) -> tuple[int, float, int]:
        if not r["replicas"]:  # cannot run: last
            return 4, 0.0, r["point"]
        if r["status"] == "infeasible":
            return 3, -r["p_meet"], r["point"]
        return order[r["status"]], rank(r["point"])[0], r["point"]

    records.sort(key=place)
    spent = sum(r["replicas"] for r in records)
    reference = next((r["replicas"] for r in records if r["status"] == "chosen"), None)
    if reference is None:
        reference = max((r["replicas"] for r in records), default=0)
    ran = [r for r in records if r["replicas"]]
    best_chance = max(ran, key=lambda r: (r["p_meet"], -rank(r["point"])[0]), default=None)
    doc = {
        "scenario": scenario_set.name,
        "overrides": list(scenario_set.overrides),  # --set as given (the figure's title)
        "varied_keys": axes,
        "objective": objective,
        "direction": direction,
        "deadline_days": deadline_days,
        "quantile": quantile,
        "chosen": next((r for r in records if r["status"] == "chosen"), None),
        "highest_p_meet": best_chance,
        "candidates": records,
        "pareto": pareto_front(records, axes),
        "replicas_spent": spent,
        "replicas_full_grid": len(scenario_set.feasible) * reference,
        "rounds": [
            {
                "round": r.number,
                "points": r.points,
                "replicas": r.replicas,
                "dropped_infeasible": len(r.infeasible),
                "dropped_dominated": len(r.dominated),
            }
            for r in result.rounds
        ],
        "stop_reason": result.stop_reason,
    }
    return finite(doc)


def _cannot_run(point: Point, keys: Sequence[str]) -> dict[str, Any]:
    """The candidate record of a point whose configuration cannot run."""
    return {
        "point": point.index,
        **{k: point.params[k] for k in keys},
        "replicas": 0,
        **dict.fromkeys(
            ["objective_mean", "objective_ci_low", "objective_ci_high"]
            + ["p_meet", "p_meet_low", "p_meet_high"]
        ),
        "status": "infeasible",
        "reason": point.infeasible,
        "dropped_round": None,
        **dict.fromkeys(
            ["difference_to_chosen", "difference_ci_low", "difference_ci_high"]
            + ["time_to_train_days_p50", "time_to_train_days_p95"]
            + ["time_to_train_days_at_quantile", "cost_usd_mean", "finished_fraction"]
        ),
    }


def pareto_front(records: Iterable[Mapping[str, Any]], keys: Sequence[str]) -> list[dict]:
    """The points no other point beats on both the time to train at the quantile and the
    mean cost (lower is better for both), fastest first. Points that never reach the
    quantile within the horizon (infinite time) are left out."""
    items = [
        r
        for r in records
        if _is_finite(r["time_to_train_days_at_quantile"]) and _is_finite(r["cost_usd_mean"])
    ]

    def beaten(r: Mapping[str, Any]) -> bool:
        t, c = r["time_to_train_days_at_quantile"], r["cost_usd_mean"]
        return any(
            o["time_to_train_days_at_quantile"] <= t
            and o["cost_usd_mean"] <= c
            and (o["time_to_train_days_at_quantile"] < t or o["cost_usd_mean"] < c)
            for o in items
        )

    front = [r for r in items if not beaten(r)]
    front.sort(key=lambda r: (r["time_to_train_days_at_quantile"], r["cost_usd_mean"]))
    return [
        {
            "point": r["point"],
            **{k: r[k] for k in keys},
            "time_to_train_days_at_quantile": r["time_to_train_days_at_quantile"],
            "cost_usd_mean": r["cost_usd_mean"],
            "p_meet": r["p_meet"],
            "status": r["status"],
        }
        for r in front
    ]


def _is_finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


# --------------------------------------------------------------------------- running it


def parse_vary(source: str, items: Sequence[str]) -> list[str]:
    """`--vary KEY=V1,V2,...` items, checked for their shape (the scenario's validation
    then checks each key and value): as `--param` items for `load_scenario`."""
    seen: set[str] = set()
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ScenarioError(
                source,
                item.strip()[:160],
                "--vary expects KEY=V1,V2,..., e.g. --vary cluster.spare_nodes=0,4,8",
            )
        if key in seen:
            raise ScenarioError(
                source, key, "--vary is given twice for this key; give all its values in one"
            )
        seen.add(key)
        if any(not piece.strip() for piece in values.split(",")):
            raise ScenarioError(
                source, key, f"--vary {item!r} has an empty value; expected KEY=V1,V2,..."
            )
    return list(items)


def load_plan_grid(
    scenario: str | Path, vary: Sequence[str], overrides: Sequence[str] | None = None
) -> ScenarioSet:
    """The grid a plan searches: the scenario with `overrides`, every `--vary` key swept."""
    return load_scenario(scenario, list(overrides or []), parse_vary(str(scenario), vary))


def plan(
    scenario: str | Path | ScenarioSet,
    deadline_days: float,
    quantile: float = 0.95,
    objective: str = "cost_usd",
    vary: Sequence[str] = (),
    overrides: Sequence[str] | None = None,
    replicas_first: int = FIRST_REPLICAS,
    replicas_max: int = MAX_REPLICAS,
    precision: float = PRECISION,
    seed: int | None = None,
    workers: int | None = None,
    executor: str | None = None,
    scheduler: str | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    pareto: ParetoFigure | None = None,
) -> Plan:
    """Race the grid's points (the scenario's sweep and `vary`, e.g. ["cluster.nodes=96,128"])
    for the one with the best mean `objective` (the direction `better_direction`
    gives) among those with P(time to train <= deadline_days) >= quantile.

    With `out`, every evaluated replica streams into `out/<name>/<run-id>/` (replicas.parquet,
    summaries, plan.json, and figures/pareto.png drawn by `pareto` from plan.json, e.g.
    `sim.show.plan_plots.pareto_figure`); without, the rows stay in memory.
    """
    if objective not in summaries.METRICS:
        raise ValueError(f"unknown objective {objective!r}; one of {', '.join(summaries.METRICS)}")
    if not (
        all(math.isfinite(x) for x in (deadline_days, quantile, precision))
        and deadline_days > 0
        and 0 < quantile <= 1
        and precision > 0
    ):
        raise ValueError("deadline_days and precision must be finite and > 0, quantile in (0, 1]")
    if replicas_first < 1 or replicas_max < 2:
        raise ValueError("replicas_first must be >= 1 and replicas_max >= 2")
    if not isinstance(scenario, ScenarioSet):
        scenario_set = load_plan_grid(scenario, vary, overrides)
    elif vary or overrides:
        raise ValueError("give vary and overrides with a scenario path, not a loaded ScenarioSet")
    else:
        scenario_set = scenario
    # what cannot run at all (every point infeasible, say) is refused here
    problems = feasibility.check(scenario_set)
    base = scenario_set.base.simulation
    seed = base.seed if seed is None else seed
    workers = default_workers() if workers is None else workers
    executor = executor or base.executor or ("processes" if workers > 1 else "serial")
    first = min(replicas_first, replicas_max)
    settings = {
        "deadline_days": deadline_days,
        "quantile": quantile,
        "objective": objective,
        "replicas_first": first,
        "replicas_max": replicas_max,
        "precision": precision,
    }
    # what would be refused later is refused before the run directory exists
    feasibility.check_replicas(scenario_set, replicas_max, option="--replicas-max")
    check_scheduler_option(executor, scheduler)
    run = (
        RunDir.create(out, scenario_set, seed, replicas_max, executor, workers, {"plan": settings})
        if out is not None
        else None
    )
    return _race_grid(scenario_set, settings, seed, workers, executor, scheduler, run, progress,
                      problems, pareto)  # fmt: skip


# the settings a plan's run.json holds (under "plan"): what a resume races again with
SETTINGS = {
    "deadline_days": (float, "the deadline in days, a number > 0"),
    "quantile": (float, "the quantile, a number in (0, 1]"),
    "objective": (str, f"one of {', '.join(summaries.METRICS)}"),
    "replicas_first": (int, "the first round's replicas, an integer >= 1"),
    "replicas_max": (int, "the most replicas a point gets, an integer >= 2"),
    "precision": (float, "the precision, a number > 0"),
}


def is_plan_run(run_dir: str | Path) -> bool:
    """Whether `run_dir` is the run directory of a plan (its run.json has plan settings);
    False for anything that is not a readable run directory (the resume says why)."""
    try:
        manifest = read_manifest(Path(run_dir), "a run directory")
    except ScenarioError:
        return False
    return "plan" in manifest


def _settings_of(run: RunDir) -> dict[str, Any]:
    """The plan settings of a run.json, checked, or a ScenarioError naming the key."""
    settings = run.manifest["plan"]
    source = str(run.path / "run.json")
    for key, (kind, expected) in SETTINGS.items():
        value = settings.get(key)
        good = (
            isinstance(value, str) and value in summaries.METRICS
            if kind is str
            else isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and (kind is float or isinstance(value, int))
        )  # fmt: skip
        if good and kind is not str:
            good = {
                "deadline_days": value > 0,
                "quantile": 0 < value <= 1,
                "replicas_first": value >= 1,
                "replicas_max": value >= 2 and value == run.manifest["replicas"],
                "precision": value > 0,
            }[key]
        if not good:
            shown = json.dumps(value, default=str)[:60]
            raise ScenarioError(source, f"plan.{key}", f"is {shown}: expected {expected}")
    return dict(settings)


def resume_plan(
    run_dir: str | Path,
    workers: int | None = None,
    executor: str | None = None,
    progress: bool = True,
    scheduler: str | None = None,
    pareto: ParetoFigure | None = None,
) -> Plan:
    """Finish an interrupted (or killed, or failed) plan: the race is run again from its
    run directory's settings, scenario and seed, and every replica a part already holds is
    read, not simulated. The replicas are the same at every point whatever the run (common
    random numbers), so the race takes the same course and plan.json is that of an
    uninterrupted plan. Refused (ScenarioError) like `api.resume_run`: while another process
    writes the directory, when its scenario, seed or settings were edited, when complete."""
    run = RunDir.open(run_dir, "--resume", lock=True)
    try:
        if "plan" not in run.manifest:
            raise ScenarioError("--resume", str(run_dir), "not a `trainsim plan` run")
        run.refuse_complete(
            (run.path / "plan.json").is_file() and run.has_table(), "plan", "its plan.json or "
            "replicas.parquet is missing or unreadable: racing its points again (the plan "
            "comes out the same)",
        )  # fmt: skip
        run.check_fingerprint()
        settings = _settings_of(run)
        scenario_set = load_scenario(run.path / "scenario.yaml")
        # the --set of the first run (its figure's title), not those of scenario.yaml (none)
        overrides = run.manifest.get("overrides") or []
        scenario_set = dataclasses.replace(scenario_set, overrides=[str(o) for o in overrides])
        check_scheduler_option(executor or run.manifest.get("executor"), scheduler)
        run.begin_resume(scenario_set, workers, executor)
        run.check_parts(part_check(run, scenario_set))  # a bad part runs again, never read
    except BaseException:
        run.release()
        raise
    problems = feasibility.check(scenario_set)
    return _race_grid(
        scenario_set,
        settings,
        run.manifest["seed"],
        run.manifest.get("workers") or default_workers(),
        run.manifest.get("executor") or "serial",
        scheduler,
        run,
        progress,
        problems,
        pareto,
    )


def _race_grid(
    scenario_set: ScenarioSet,
    settings: dict[str, Any],
    seed: int,
    workers: int,
    executor: str,
    scheduler: str | None,
    run: RunDir | None,
    progress: bool,
    problems: list[feasibility.Problem],
    pareto: ParetoFigure | None,
) -> Plan:
    """Race the grid's feasible points; with `run`, every replica streams into its parts
    (and the replicas parts already hold are read, not simulated: a resume), then plan.json,
    the figure (`pareto`, if given) and the summaries are written and the run is marked
    complete."""
    deadline_days, quantile = settings["deadline_days"], settings["quantile"]
    objective, precision = settings["objective"], settings["precision"]
    first, replicas_max = settings["replicas_first"], settings["replicas_max"]
    direction = better_direction(objective)
    frames: list[pd.DataFrame] = []  # whole rows, kept only without a run directory
    columns = list(dict.fromkeys([*RACE_COLUMNS, objective]))
    bar = _RoundBar(progress)

    def evaluate(points: list[int], start: int, stop: int) -> pd.DataFrame:
        kept: list[pd.DataFrame] = []
        have = run.done() if run is not None else {}  # a resume: what parts already hold

        def sink(point: int, first_replica: int, frame: pd.DataFrame) -> None:
            if run is not None:
                run.write_part(point, first_replica, frame)
            else:
                frames.append(frame)
                kept.append(frame[columns])
            bar.advance(len(frame))

        new = stop - start
        bar.start_round(len(points), start, stop)
        bar.advance(sum(len(have.get(p, set()) & set(range(start, stop))) for p in points))
        run_montecarlo(
            scenario_set,
            stop,
            seed,
            workers,
            executor,
            progress=False,
            chunk_size=max(1, min(200, new, math.ceil(new * len(points) / (4 * workers)))),
            sink=sink,
            done={p: set(range(start)) | have.get(p, set()) for p in points},
            points=set(points),  # type: ignore[arg-type]  # any container of indices
            scheduler=scheduler,
        )
        if run is not None:  # the round's rows as the parts hold them, simulated now or before
            kept = _rows_of_parts(run, points, start, stop, columns)
        return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=columns)

    try:
        # a stop between the rounds' simulations (judging, reading parts, writing plan.json)
        # is a stop too: interrupted, resumable, not "failed"
        with _stops_between_rounds():
            with bar:
                result = race(
                    [p.index for p in scenario_set.feasible],  # infeasible points never race
                    evaluate,
                    deadline_days,
                    quantile,
                    objective,
                    direction,
                    first,
                    replicas_max,
                    precision,
                    on_round=bar.end_round,
                )
            doc = {**outcome(scenario_set, result, deadline_days, quantile, objective, direction)}
            doc.update(seed=seed, precision=precision, replicas_first=first)
            doc["replicas_max"] = replicas_max
            if run is None:
                table = pd.concat(frames, ignore_index=True)
                table = table.sort_values(["point", "replica"], ignore_index=True)
                return Plan(doc, scenario_set, None, problems, table)
            doc["run_dir"] = str(run.path)
            write_regular(run.path / "plan.json", json.dumps(doc, indent=2) + "\n")
            if pareto is not None:
                figures = run.path / "figures"
                figures.mkdir(exist_ok=True)
                pareto(doc).savefig(figures / "pareto.png", dpi=110)
            finalise(run, scenario_set, figures=None)
    except Interrupted as stop:
        if run is None:
            raise
        complete = run.manifest.get("status") == "complete"  # the stop came at the very end
        if not complete:
            run.try_status("interrupted", signal=stop.signal_name)
        raise RunInterrupted(run.path, stop, complete) from None  # exit 130 either way
    except SchedulerLost as lost:  # the finished chunks are kept: say how to complete it
        if run is None:
            raise
        if run.manifest.get("status") != "complete":
            run.try_status("failed")
        raise lost.of_run(run.path) from None
    except BaseException:
        if run is not None and run.manifest.get("status") != "complete":
            run.try_status("failed")
        raise
    return Plan(doc, scenario_set, run.path, problems)


@contextlib.contextmanager
def _stops_between_rounds() -> Iterator[None]:
    """SIGINT or SIGTERM raise `Interrupted` at once in the main thread (while a round
    simulates, the Monte Carlo's own handlers stop it instead); after a stop, further
    signals are ignored for a while, as after a stop of the simulation."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    caught: list[str] = []

    def handle(signum, frame) -> None:
        if caught:
            return
        caught.append(signal.Signals(signum).name)
        raise Interrupted(caught[0], 0, 0)

    for signum in previous:
        signal.signal(signum, handle)
    try:
        yield
    except Interrupted:
        ignore_for_a_while(previous)  # the stop is being saved: a second signal waits
        raise
    except BaseException:
        _restore(previous)
        raise
    _restore(previous)


def _restore(handlers: dict[int, Any]) -> None:
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def _rows_of_parts(
    run: RunDir, points: list[int], start: int, stop: int, columns: list[str]
) -> list[pd.DataFrame]:
    """The race's columns of replicas [start, stop) of `points`, read from the run's parts."""
    wanted = set(points)
    frames = []
    for point, first, count, path in run.parts():
        if point in wanted and first < stop and first + count > start:
            rows = pd.read_parquet(path, columns=columns)
            frames.append(rows[(rows["replica"] >= start) & (rows["replica"] < stop)])
    return frames


class _RoundBar:
    """A rich progress bar on stderr, one line per round (silent when disabled)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._progress: Progress | PlainProgress | None = None
        self._task: Any = None
        self._round = 0
        self._description = ""

    def __enter__(self) -> _RoundBar:
        if self.enabled:
            self._progress = progress_display(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeColumn(),
                unit="replicas",
            )
            self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()

    def start_round(self, points: int, start: int, stop: int) -> None:
        self._round += 1
        self._description = f"round {self._round}: {points} points × {stop - start} replicas"
        if self._progress is not None:
            self._task = self._progress.add_task(self._description, total=points * (stop - start))

    def advance(self, count: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, count)

    def end_round(self, done: Round) -> None:
        if self._progress is not None and self._task is not None:
            left = f", out: {len(done.infeasible)} infeasible, {len(done.dominated)} dominated"
            self._progress.update(self._task, description=self._description + left)


__all__ = [
    "FIRST_REPLICAS",
    "MAX_REPLICAS",
    "PRECISION",
    "STATUSES",
    "Plan",
    "Race",
    "Round",
    "Sample",
    "Verdict",
    "judge",
    "load_plan_grid",
    "outcome",
    "paired_difference",
    "pareto_front",
    "parse_vary",
    "plan",
    "race",
    "resume_plan",
    "samples_of",
    "wilson_interval",
]
