"""The library calls behind the `trainsim` commands, for notebooks and scripts too.

`run_scenario` loads (or takes) a scenario, runs the Monte Carlo and summarises it.
With `out` it first creates the run directory (so an unwritable path fails before
any work), streams finished chunks into it, and finalises it (replicas.parquet,
summaries, figures); an interrupted run is marked so and `resume_run` completes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sim import analysis, feasibility, plots
from sim.engine import build_plan, simulate_replica
from sim.montecarlo import Interrupted, default_workers
from sim.montecarlo import run as run_montecarlo
from sim.results import RunDir, chrome_trace
from sim.scenario import ScenarioError, ScenarioSet, load_scenario

# the columns the standard figures read (not the whole table)
FIGURE_COLUMNS = list(
    dict.fromkeys(
        [
            "scenario",
            "point",
            "replica",
            "finished",
            "error",
            "time_to_train_days",
            "lost_work_hours",
            *(column for column, _, _ in plots.BREAKDOWN),
        ]
    )
)


@dataclass
class RunOutcome:
    scenario_set: ScenarioSet
    summary: pd.DataFrame  # one row per (point, metric)
    summary_doc: dict[str, Any]  # the documented summary JSON
    run_dir: Path | None
    # sweep points no replica of which can finish (the horizon is shorter than the ideal time)
    problems: list[feasibility.Problem] = field(default_factory=list)
    _table: pd.DataFrame | None = None

    @property
    def table(self) -> pd.DataFrame:
        """One row per (point, replica); read from the run directory when there is one."""
        if self._table is None and self.run_dir is not None:
            self._table = pd.read_parquet(self.run_dir / "replicas.parquet")
        assert self._table is not None
        return self._table


class RunInterrupted(Exception):
    """The run stopped on SIGINT/SIGTERM; its directory holds what finished."""

    def __init__(self, run_dir: Path | None, cause: Interrupted):
        self.run_dir, self.cause = run_dir, cause
        super().__init__(str(cause))


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
    scheduler: str | None = None,
) -> RunOutcome:
    """Run every sweep point of a scenario; stream into `out/<name>/<run-id>/` when `out`
    is given (else keep the table in memory)."""
    scenario_set = (
        scenario
        if isinstance(scenario, ScenarioSet)
        else load_scenario(scenario, overrides, params)
    )
    problems = feasibility.check(scenario_set)
    base = scenario_set.base.simulation
    replicas = base.replicas if replicas is None else replicas
    seed = base.seed if seed is None else seed
    workers = default_workers() if workers is None else workers
    executor = executor or base.executor or ("processes" if workers > 1 else "serial")
    if out is None:
        table = run_montecarlo(
            scenario_set, replicas, seed, workers, executor, progress, scheduler=scheduler
        )
        summary = analysis.summarize(table, scenario_set.swept_keys)
        doc = analysis.summary_json(scenario_set, table, summary, replicas, seed)
        return RunOutcome(scenario_set, summary, doc, None, problems, table)
    run = RunDir.create(out, scenario_set, seed, replicas, executor, workers)
    return _complete(run, scenario_set, progress, figures, timeline, problems, scheduler)


def resume_run(
    run_dir: str | Path,
    workers: int | None = None,
    executor: str | None = None,
    progress: bool = True,
    figures: bool = True,
    scheduler: str | None = None,
) -> RunOutcome:
    """Finish an interrupted (or killed) run: only the replicas no part holds are run, and
    the table is identical to an uninterrupted run's."""
    run = RunDir.open(run_dir)
    status = run.manifest.get("status")
    if status == "complete":
        raise ScenarioError("--resume", str(run_dir), "this run is complete: nothing to resume")
    scenario_set = load_scenario(run.path / "scenario.yaml")
    if workers is not None:
        run.manifest["workers"] = workers
    if executor is not None:
        run.manifest["executor"] = executor
    run.manifest.setdefault("resumed", []).append(run.manifest.get("ended"))
    run.set_status("running")
    return _complete(run, scenario_set, progress, figures, False, [], scheduler)


def _complete(
    run: RunDir,
    scenario_set: ScenarioSet,
    progress: bool,
    figures: bool,
    timeline: bool,
    problems: list[feasibility.Problem],
    scheduler: str | None,
) -> RunOutcome:
    manifest = run.manifest
    seed, replicas = manifest["seed"], manifest["replicas"]
    try:
        run_montecarlo(
            scenario_set,
            replicas,
            seed,
            manifest["workers"],
            manifest["executor"],
            progress,
            sink=run.write_part,
            done=run.done(),
            scheduler=scheduler,
        )
    except Interrupted as stop:
        run.set_status("interrupted", signal=stop.signal_name)
        raise RunInterrupted(run.path, stop) from None
    except BaseException:
        run.set_status("failed")
        raise
    try:
        table_path = run.merge()
        summary = analysis.summarize_file(table_path, scenario_set.swept_keys)
        light = pd.read_parquet(table_path, columns=["point", "finished", "error"])
        doc = analysis.summary_json(scenario_set, light, summary, replicas, seed)
        doc["run_dir"] = str(run.path)
        summary.to_csv(run.path / "summary.csv", index=False)
        (run.path / "summary.json").write_text(_dumps(doc))
        if timeline:
            first = scenario_set.points[0]
            record = simulate_replica(build_plan(first.scenario), 0, seed, timeline=True)
            (run.path / "timeline.json").write_text(_dumps(chrome_trace(record.timeline)))
        if figures:
            keys = scenario_set.swept_keys
            columns = [*FIGURE_COLUMNS, *(k for k in keys if k not in FIGURE_COLUMNS)]
            marks = {key: analysis.interval_marks(scenario_set.base, key) for key in keys}
            plots.write_figures(
                pd.read_parquet(table_path, columns=columns),
                summary,
                run.path / "figures",
                keys,
                marks,
            )
    except BaseException:
        run.set_status("failed")
        raise
    run.set_status("complete")
    return RunOutcome(scenario_set, summary, doc, run.path, problems)


def _dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v))
