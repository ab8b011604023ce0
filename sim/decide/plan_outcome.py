"""A plan's outcome, as plan.json holds it (`outcome`): every candidate with its status
(chosen, feasible, unproven, infeasible, dominated), its estimates, its ideal time from the
calculator and why, best first; the closest point when none meets the deadline; the
time-cost Pareto front, the replicas spent; `Plan`, what `plan` returns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim.decide.racing import Race, paired_difference, quantile_days, samples_of
from sim.model import calculator, feasibility
from sim.model.scenario_set import Point, ScenarioSet
from sim.runs.files import finite
from sim.runs.results import TableOfRun

STATUSES = ("chosen", "feasible", "unproven", "infeasible", "dominated")
# the order of "every point, best first": those that meet the deadline (or may) by their
# objective, the costlier ones, then those that miss it closest first, then those that cannot run
ORDER = ("chosen", "feasible", "unproven", "dominated", "infeasible")
MISSES_DEADLINE = "misses the deadline"  # the reason of an infeasible point that ran


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
                "ideal_days": ideal_days(point),
            }
        )

    def closeness(r: dict[str, Any]) -> tuple[float, float, float, int]:
        """How near a point comes to the deadline: the deadline its replicas would meet at
        the quantile (never: infinite), then its P(meet), then its objective."""
        at = r["time_to_train_days_at_quantile"]
        at = at if _is_finite(at) else math.inf
        return at, -r["p_meet"], rank(r["point"])[0], r["point"]

    def place(r: dict[str, Any]) -> tuple[int, Any]:
        if not r["replicas"]:  # cannot run: last
            return len(ORDER), r["point"]
        if r["status"] == "infeasible":  # misses the deadline: the closest first
            return ORDER.index("infeasible"), closeness(r)
        return ORDER.index(r["status"]), rank(r["point"])

    records.sort(key=place)
    spent = sum(r["replicas"] for r in records)
    reference = next((r["replicas"] for r in records if r["status"] == "chosen"), None)
    if reference is None:
        reference = max((r["replicas"] for r in records), default=0)
    ran = [r for r in records if r["replicas"]]
    closest = min(ran, key=closeness, default=None)
    best_chance = min(ran, key=lambda r: (-r["p_meet"], closeness(r)), default=None)
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
        # the lowest time to train at the quantile: what the answer names when nothing is chosen
        "closest": closest,
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
            + ["ideal_days"]
        ),
    }


def ideal_days(point: Point) -> float:
    """The calculator's time to train of a point without any failure (`trainsim calc`'s
    ideal time): steps x step time."""
    scenario = point.scenario
    return calculator.step_time_s(scenario) * calculator.total_steps(scenario) / calculator.DAY_S


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
