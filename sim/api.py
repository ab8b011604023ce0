"""The library calls behind the `trainsim` commands, for notebooks and scripts too.

`run_scenario` loads (or takes) a scenario, runs the Monte Carlo and summarises it.
With `out` it first creates the run directory (so an unwritable path fails before
any work), streams finished chunks into it, and finalises it (replicas.parquet,
summaries, figures); an interrupted run is marked so and `resume_run` completes it.
A sweep point that cannot run (`Point.infeasible`) is never simulated: it has no
replica rows, and the summaries list it with its reason and no metric.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from sim import analysis, feasibility, plots
from sim.engine import build_plan, simulate_replica
from sim.montecarlo import Interrupted, default_workers, frame_of, sweep_types
from sim.montecarlo import run as run_montecarlo
from sim.results import RunDir, TableOfRun, chrome_trace
from sim.scenario import ScenarioError, ScenarioSet, load_scenario

# the columns the standard figures read (not the whole table)
FIGURE_COLUMNS = plots.TABLE_COLUMNS


@dataclass
class RunOutcome(TableOfRun):
    scenario_set: ScenarioSet
    summary: pd.DataFrame  # one row per (point, metric); one per infeasible point (no metric)
    summary_doc: dict[str, Any]  # the documented summary JSON
    run_dir: Path | None
    # sweep points no replica of which can finish (the horizon is shorter than the ideal time)
    problems: list[feasibility.Problem] = field(default_factory=list)
    _table: pd.DataFrame | None = None


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
    points: range | None = None,
    target_ci: float | None = None,
) -> RunOutcome:
    """Run every sweep point of a scenario (or the `points` slice); stream into
    `out/<name>/<run-id>/` when `out` is given (else keep the table in memory). With
    `target_ci`, replicas are added per point until the mean time to train is known to
    that relative 95% half-width (at most `replicas`)."""
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
        if points is not None or target_ci is not None:
            raise ValueError("points slices and target_ci need a run directory (out)")
        table = run_montecarlo(
            scenario_set, replicas, seed, workers, executor, progress, scheduler=scheduler
        )
        summary = analysis.summarize(table, scenario_set.swept_keys)
        doc = analysis.summary_json(scenario_set, table, summary, replicas, seed)
        summary = analysis.with_infeasible(summary, scenario_set)
        return RunOutcome(scenario_set, summary, doc, None, problems, table)
    extra: dict[str, Any] = {}
    if points is not None:
        if not 0 <= points.start < points.stop <= len(scenario_set.points):
            raise ScenarioError(
                "--points",
                f"{points.start}:{points.stop}",
                f"expected I:J with 0 <= I < J <= {len(scenario_set.points)} (the sweep's points)",
            )
        extra["points_slice"] = [points.start, points.stop]
    if target_ci is not None:
        extra["target_ci"] = target_ci
    if executor == "dask" and scheduler:
        from sim.dask_executor import check_scheduler

        check_scheduler(scheduler)  # an unreachable cluster leaves no run directory behind
    run = RunDir.create(out, scenario_set, seed, replicas, executor, workers, extra)
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
    if "plan" in run.manifest:  # resuming would run its whole grid, not the race
        raise ScenarioError(
            "--resume", str(run_dir), "this is a `trainsim plan` run, which does not resume: "
            "run the plan command again",
        )  # fmt: skip
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
    points = _slice(manifest)

    def simulate(count: int, which) -> None:
        run_montecarlo(
            scenario_set,
            count,
            seed,
            manifest["workers"],
            manifest["executor"],
            progress,
            sink=run.write_part,
            done=run.done(),
            points=which,
            scheduler=scheduler,
        )

    try:
        if manifest.get("target_ci"):
            which = points if points is not None else range(len(scenario_set.points))
            _adaptive(
                run, simulate, [p for p in which if scenario_set.points[p].infeasible is None]
            )
        else:
            simulate(replicas, points)
    except Interrupted as stop:
        run.set_status("interrupted", signal=stop.signal_name)
        raise RunInterrupted(run.path, stop) from None
    except BaseException:
        run.set_status("failed")
        raise
    return finalise(run, scenario_set, figures, timeline, problems)


def _slice(manifest: dict[str, Any]) -> range | None:
    points = manifest.get("points_slice")
    return range(*points) if points else None


# Adaptive replication: the first round's replicas per point; each round doubles them.
FIRST_ROUND = 50


def _adaptive(run: RunDir, simulate, points) -> None:
    """Add replicas to each point (of those that can run), doubling them round by round,
    until the 95% confidence half-width of its mean time to train is at most `target_ci` ×
    the mean, or it has the run's `replicas`. Replica r is the same whatever the round, so
    adding replicas never changes those already run."""
    target, most = run.manifest["target_ci"], run.manifest["replicas"]
    active = set(points)
    count = min(most, FIRST_ROUND)
    reached: dict[str, dict[str, float]] = {}
    while active:
        simulate(count, active)
        for point in sorted(active):
            days = pd.concat(
                [
                    pd.read_parquet(path, columns=["time_to_train_days"])
                    for path in run.part_paths(point)
                ]
            )["time_to_train_days"].dropna()
            mean = float(days.mean()) if len(days) else float("nan")
            half = (
                1.96 * float(days.std(ddof=1)) / len(days) ** 0.5 if len(days) > 1 else float("inf")
            )
            reached[str(point)] = {"replicas": count, "mean_days": mean, "half_width_days": half}
            if (len(days) > 1 and half <= target * mean) or count >= most:
                active.discard(point)
        run.manifest["adaptive"] = reached
        run.save()
        count = min(most, 2 * count)


def finalise(
    run: RunDir,
    scenario_set: ScenarioSet,
    figures: bool = True,
    timeline: bool = False,
    problems: list[feasibility.Problem] | None = None,
) -> RunOutcome:
    """Merge the parts, write the summaries and figures, and mark the run complete. The
    infeasible points (of the run's slice) are in the summaries, with their reason."""
    manifest = run.manifest
    seed, replicas = manifest["seed"], manifest["replicas"]
    points = _slice(manifest)
    infeasible = {
        p.index
        for p in scenario_set.points
        if p.infeasible is not None and (points is None or p.index in points)
    }
    try:
        table_path = _merge(run, scenario_set, points)
        summary = analysis.summarize_file(table_path, scenario_set.swept_keys)
        light = pd.read_parquet(table_path, columns=["point", "finished", "error"])
        doc = analysis.summary_json(scenario_set, light, summary, replicas, seed)
        present = set(light["point"].unique()) | infeasible
        doc["points"] = [p for p in doc["points"] if p["point"] in present]
        summary = analysis.with_infeasible(summary, scenario_set, infeasible)
        for point in doc["points"]:
            point["replicas"] = int((light["point"] == point["point"]).sum())
            adaptive = manifest.get("adaptive", {}).get(str(point["point"]))
            if adaptive:
                point["ci_half_width_days"] = adaptive["half_width_days"]
        doc["run_dir"] = str(run.path)
        summary.to_csv(run.path / "summary.csv", index=False)
        (run.path / "summary.json").write_text(_dumps(doc))
        if timeline:
            first = (scenario_set.feasible or scenario_set.points)[0]
            record = simulate_replica(build_plan(first.scenario), 0, seed, timeline=True)
            (run.path / "timeline.json").write_text(_dumps(chrome_trace(record.timeline)))
        if figures and len(light):  # a slice of infeasible points only has nothing to draw
            keys = scenario_set.varied_keys  # the figures' axes: keys with several values
            # a table of an older version lacks some columns: their figures are skipped
            names = set(pq.read_schema(table_path).names)
            columns = [c for c in FIGURE_COLUMNS if c in names]
            columns += [k for k in keys if k not in columns]
            marks = {key: analysis.interval_marks(scenario_set.runnable_base, key) for key in keys}
            # only the columns the figures read, error rows dropped (as the strings of the
            # scenario and error columns are what would grow with the replicas)
            rows = pd.read_parquet(table_path, columns=columns)
            rows = rows[(light["error"] == "").to_numpy()]
            rows["scenario"] = pd.Categorical.from_codes(
                [0] * len(rows), categories=[scenario_set.name]
            )
            plots.write_figures(
                rows,
                summary,
                run.path / "figures",
                keys,
                marks,
            )
    except BaseException:
        run.set_status("failed")
        raise
    run.set_status("complete")
    return RunOutcome(scenario_set, summary, doc, run.path, problems or [])


def _merge(run: RunDir, scenario_set: ScenarioSet, points: range | None) -> Path:
    """`run.merge()`; for a slice whose every point is infeasible (no part), an empty
    replicas.parquet with the table's columns, so that the slice merges with the others."""
    wanted = [p for p in scenario_set.points if points is None or p.index in points]
    if run.parts() or any(p.infeasible is None for p in wanted):
        return run.merge()
    path = run.path / "replicas.parquet"
    frame_of([], scenario_set.swept_keys, sweep_types(scenario_set)).to_parquet(path, index=False)
    return path


def merge_runs(run_dirs: list[str | Path], out: str | Path, figures: bool = True) -> RunOutcome:
    """Join runs of slices of one sweep (`--points I:J`) into one run, equal to the run of
    the whole sweep: same scenario, seed and replicas, disjoint points."""
    runs = [RunDir.open(d) for d in run_dirs]
    if not runs:
        raise ScenarioError("merge", "", "give the run directories to merge")
    texts = {(r.path / "scenario.yaml").read_text() for r in runs}
    if len(texts) != 1:
        raise ScenarioError(
            "merge", str(runs[1].path), "the runs differ in scenario, seed or replicas: "
            "only slices of one sweep (the same scenario.yaml) can be merged",
        )  # fmt: skip
    seen: dict[int, Path] = {}
    for r in runs:
        if r.manifest.get("status") != "complete":
            raise ScenarioError(
                "merge", str(r.path), "this run is not complete (--resume it first)"
            )
        for point in pd.read_parquet(r.path / "replicas.parquet", columns=["point"])[
            "point"
        ].unique():
            if int(point) in seen:
                raise ScenarioError(
                    "merge", str(r.path), f"sweep point {point} is also in {seen[int(point)]}"
                )
            seen[int(point)] = r.path
    scenario_set = load_scenario(runs[0].path / "scenario.yaml")
    first = runs[0].manifest
    merged = RunDir.create(
        out, scenario_set, first["seed"], first["replicas"], first["executor"], first["workers"],
        extra={"merged_from": [str(r.path) for r in runs]},
    )  # fmt: skip
    for r in runs:
        table = pd.read_parquet(r.path / "replicas.parquet")
        for point, rows in table.groupby("point", sort=True):
            merged.write_part(int(point), int(rows["replica"].iloc[0]), rows)
    infeasible = {p.index for p in scenario_set.points if p.infeasible is not None}
    missing = sorted(set(range(len(scenario_set.points))) - set(seen) - infeasible)
    if missing:
        merged.manifest["missing_points"] = missing
    return finalise(merged, scenario_set, figures)


def _dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v))
