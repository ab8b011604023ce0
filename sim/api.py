"""The library calls behind the `trainsim` commands, for notebooks and scripts too.

`run_scenario` loads (or takes) a scenario, runs the Monte Carlo, summarises,
and optionally writes the run directory with figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sim import analysis, feasibility, plots
from sim.engine import build_plan, simulate_replica
from sim.montecarlo import run as run_montecarlo
from sim.results import write_run
from sim.scenario import ScenarioSet, load_scenario


@dataclass
class RunOutcome:
    scenario_set: ScenarioSet
    table: pd.DataFrame  # one row per (point, replica)
    summary: pd.DataFrame  # one row per (point, metric)
    summary_doc: dict[str, Any]  # the documented summary JSON
    run_dir: Path | None
    # sweep points no replica of which can finish (the horizon is shorter than the ideal time)
    problems: list[feasibility.Problem] = field(default_factory=list)


def run_scenario(
    scenario: str | Path | ScenarioSet,
    overrides: list[str] | None = None,
    params: list[str] | None = None,
    replicas: int | None = None,
    seed: int | None = None,
    workers: int | None = None,
    executor: str | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    figures: bool = True,
    timeline: bool = False,
) -> RunOutcome:
    """Run every sweep point of a scenario; write `out/<name>/<run-id>/` when `out` is given."""
    scenario_set = (
        scenario
        if isinstance(scenario, ScenarioSet)
        else load_scenario(scenario, overrides, params)
    )
    problems = feasibility.check(scenario_set)
    base = scenario_set.base.simulation
    replicas = base.replicas if replicas is None else replicas
    seed = base.seed if seed is None else seed
    table = run_montecarlo(scenario_set, replicas, seed, workers, executor, progress)
    summary = analysis.summarize(table, scenario_set.swept_keys)
    doc = analysis.summary_json(scenario_set, table, summary, replicas)
    run_dir = None
    if out is not None:
        marks = {
            key: analysis.interval_marks(scenario_set.base, key) for key in scenario_set.swept_keys
        }
        trace = None
        if timeline:
            first = scenario_set.points[0]
            trace = simulate_replica(build_plan(first.scenario), 0, seed, timeline=True).timeline
        run_dir = write_run(
            Path(out),
            scenario_set,
            seed,
            table,
            summary,
            doc,
            figures=(
                (lambda d: plots.write_figures(table, summary, d, scenario_set.swept_keys, marks))
                if figures
                else None
            ),
            timeline=trace,
        )
    return RunOutcome(scenario_set, table, summary, doc, run_dir, problems)
