"""The library calls behind the `trainsim` commands, for notebooks and scripts too.

`run_scenario` loads (or takes) a scenario, runs the Monte Carlo and summarises it.
With `out` it first creates the run directory (so an unwritable path fails before
any work), streams finished chunks into it, and finalises it (replicas.parquet,
summaries, and the figures that `figures` draws: `sim.show.run_figures.write_run_figures`
for the standard set); an interrupted run is marked so and `resume_run` completes it.
One process writes a run directory at a time (`RunDir`'s lock); a resume checks that
the scenario, seed and replicas are those the run started with (its fingerprint) and
sets aside parts that cannot be merged, running their replicas again. A full disk is
said as such, with what was kept and how to resume.
A sweep point that cannot run (`Point.infeasible`) is never simulated: it has no
replica rows, and the summaries list it with its reason and no metric.
"""

from __future__ import annotations

import functools
import json
import shlex
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.engine import build_plan, simulate_replica
from sim.model import feasibility
from sim.model.scenario import load_scenario
from sim.model.scenario_set import ScenarioError, ScenarioSet
from sim.runs import arguments, incident_log, summaries
from sim.runs.dask_executor import SchedulerLost, check_scheduler_option
from sim.runs.files import is_disk_error, read_bounded, replacing, write_regular
from sim.runs.manifest import resume_command, trainsim_command
from sim.runs.montecarlo import (
    Interrupted,
    ReplicaErrors,
    default_workers,
    frame_of,
    part_schema,
    stop_on_signals,
    sweep_types,
)
from sim.runs.montecarlo import run as run_montecarlo
from sim.runs.parts import PartCheck, PartsRejected, schema_difference, with_provenance
from sim.runs.results import RunDir, TableOfRun, chrome_trace

# draws a finalised run's figures into its figures/ from (run, scenario set, the merged table's
# path, its point/finished/error columns, the summary table); handed in by the caller, since
# figures are drawn above this layer (`sim.show.run_figures.write_run_figures`)
FigureWriter = Callable[[RunDir, ScenarioSet, Path, pd.DataFrame, pd.DataFrame], None]


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
    """The run stopped on SIGINT/SIGTERM; its directory holds what finished (`complete`: the
    stop came once the run was complete, nothing to resume)."""

    def __init__(self, run_dir: Path | None, cause: Interrupted, complete: bool = False):
        self.run_dir, self.cause, self.complete = run_dir, cause, complete
        super().__init__(str(cause))


class ReplicasRaised(Exception):
    """Replicas of a run raised: their rows are error rows (kept in `kept`, the run's table
    or directory, if it has one), so the run's answer cannot be trusted. `outcome`: the run
    as it came out, when it did; `traceback`: the first one's, when it raised in this
    process (else "")."""

    def __init__(
        self,
        scenario_set: ScenarioSet,
        errors: ReplicaErrors,
        failed_points: list[int],
        kept: Path | None = None,
        outcome: RunOutcome | None = None,
    ):
        self.errors, self.failed_points, self.kept = errors, failed_points, kept
        self.outcome, self.traceback = outcome, errors.traceback
        super().__init__(_raised_text(scenario_set, errors, failed_points, kept))


def _raised_text(
    scenario_set: ScenarioSet, errors: ReplicaErrors, failed_points: list[int], kept: Path | None
) -> str:
    points = scenario_set.points
    sweep = len(points) > 1

    def point_text(index: int) -> str:
        params = ", ".join(f"{k}={v}" for k, v in points[index].params.items())
        return f"point {index}" + (f" ({params})" if params else "")

    replicas = "replica" if errors.rows == 1 else "replicas"
    text = f"{errors.count:,} of {errors.rows:,} {replicas} raised"
    if sweep and failed_points:
        named = ", ".join(point_text(i) for i in failed_points[:5])
        more = f" and {len(failed_points) - 5:,} more" if len(failed_points) > 5 else ""
        text += f", every replica of {named}{more}"
    first = f"point {errors.point} replica" if sweep else "replica"
    text += f"; the first, {first} {errors.replica}: {errors.error}"
    if kept is not None:
        text += f". Their rows are kept, with the error, in {kept}"
    return text


def replicas_raised(
    scenario_set: ScenarioSet,
    session: ReplicaErrors,
    table: pd.DataFrame,
    kept: Path | None = None,
    outcome: RunOutcome | None = None,
) -> ReplicasRaised | None:
    """ReplicasRaised if replicas of `table` (its point, replica and error columns) raised,
    naming the points none of whose replicas ran and the first one's error (with its
    traceback from `session`, what this process's replicas did, when it raised here)."""
    failed = table[table["error"] != ""]
    if not len(failed):
        return None
    errors = ReplicaErrors()
    errors.add(table)  # the first error row of the whole table (a resume's too)
    if (errors.point, errors.replica) == (session.point, session.replica):
        errors.traceback = session.traceback
    ok = set(table.loc[table["error"] == "", "point"].unique())
    failed_points = sorted(int(p) for p in set(failed["point"].unique()) - ok)
    return ReplicasRaised(scenario_set, errors, failed_points, kept, outcome)


def _check_errors(outcome: RunOutcome, session: ReplicaErrors, table: pd.DataFrame) -> RunOutcome:
    """The outcome, unless replicas of the run raised: then ReplicasRaised."""
    kept = None if outcome.run_dir is None else Path(outcome.run_dir) / "replicas.parquet"
    raised = replicas_raised(outcome.scenario_set, session, table, kept, outcome)
    if raised is not None:
        raise raised
    return outcome


class MergeInterrupted(RunInterrupted):
    """A merge stopped on SIGINT/SIGTERM; its directory says interrupted. A merged directory
    is not resumed: the merge is run again (into a new directory)."""


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
    figures: FigureWriter | None = None,
    timeline: bool = False,
    scheduler: str | None = None,
    points: range | None = None,
    target_ci: float | None = None,
    incidents: bool = False,
    note: dict[str, Any] | None = None,
) -> RunOutcome:
    """Run every sweep point of a scenario (or the `points` slice); stream into
    `out/<name>/<run-id>/` when `out` is given (else keep the table in memory). With
    `target_ci`, replicas are added per point until the mean time to train is known to
    that relative 95% half-width (at most `replicas`). `note`: entries for run.json that
    the simulation does not read (e.g. `optimize`'s question, which a resume answers).
    Arguments of the wrong type or out of range raise `sim.runs.arguments.ArgumentError`."""
    here = "run_scenario"
    scenario = arguments.scenario(here, scenario)
    overrides = arguments.texts(here, "overrides", overrides, "checkpoint.interval_steps=500")
    params = arguments.texts(here, "params", params, "checkpoint.interval_steps=500,1000")
    replicas, seed = arguments.replicas(here, replicas), arguments.seed(here, seed)
    workers, executor = arguments.workers(here, workers), arguments.executor(here, executor)
    out = None if out is None else arguments.path(here, "out", out)
    points, target_ci = (
        arguments.points(here, points),
        arguments.share(here, "target_ci", target_ci),
    )
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
    check_scheduler_option(executor, scheduler)  # unreachable: no run directory left behind
    if out is None:
        if points is not None or target_ci is not None or incidents:
            raise ValueError("points slices, target_ci and incidents need a run directory (out)")
        session = ReplicaErrors()
        table = run_montecarlo(
            scenario_set, replicas, seed, workers, executor, progress, scheduler=scheduler,
            errors=session,
        )  # fmt: skip
        summary = summaries.summarize(table, scenario_set.swept_keys)
        doc = summaries.summary_json(scenario_set, table, summary, replicas, seed)
        summary = summaries.with_infeasible(summary, scenario_set)
        outcome = RunOutcome(scenario_set, summary, doc, None, problems, table)
        return _check_errors(outcome, session, table)
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
    if incidents:
        extra["incidents"] = True  # every replica's failures: incidents.parquet
    extra.update(note or {})
    run = RunDir.create(out, scenario_set, seed, replicas, executor, workers, extra)
    return _complete(run, scenario_set, progress, figures, timeline, problems, scheduler)


def resume_run(
    run_dir: str | Path,
    workers: int | None = None,
    executor: str | None = None,
    progress: bool = True,
    figures: FigureWriter | None = None,
    scheduler: str | None = None,
) -> RunOutcome:
    """Finish an interrupted (or killed) run: only the replicas no part holds are run, and
    the table is identical to an uninterrupted run's. Refused (ScenarioError) while another
    process writes the directory, and when its scenario, seed or replicas were edited."""
    run_dir = arguments.path("resume_run", "run_dir", run_dir)
    workers = arguments.workers("resume_run", workers)
    executor = arguments.executor("resume_run", executor)
    run = RunDir.open(run_dir, "--resume", lock=True)
    try:
        run.refuse_complete(
            run.has_table(), "run", "its replicas.parquet is missing or unreadable: running "
            "its replicas again (the table comes out the same)",
        )  # fmt: skip
        if "plan" in run.manifest:  # resuming here would run its whole grid, not the race
            raise ScenarioError(
                "--resume", str(run_dir), "this is a `trainsim plan` run: resume it with "
                "sim.decide.planner.resume_plan (what `trainsim run --resume` does for a plan)",
            )  # fmt: skip
        if "merged_from" in run.manifest:
            raise ScenarioError(
                "--resume", str(run_dir), "this run merges slices (trainsim merge): resume "
                "the slices, then merge them again",
            )  # fmt: skip
        run.check_fingerprint()
        check_scheduler_option(executor or run.manifest.get("executor"), scheduler)
        scenario_set = load_scenario(run.path / "scenario.yaml")
        run.begin_resume(scenario_set, workers, executor)
    except BaseException:
        run.release()
        raise
    return _complete(run, scenario_set, progress, figures, False, [], scheduler)


def part_check(run: RunDir, scenario_set: ScenarioSet) -> PartCheck:
    """What the parts of `run` must be (see `RunDir.check_parts`)."""
    manifest = run.manifest
    points = _slice(manifest)
    seed = manifest["seed"]

    @functools.cache
    def schema_of(point: int):
        return part_schema(scenario_set, point, seed)

    def allowed(point: int) -> bool:
        return (
            0 <= point < len(scenario_set.points)
            and scenario_set.points[point].infeasible is None
            and (points is None or point in points)
        )

    companion = incident_log.part_problem if manifest.get("incidents") else None
    return PartCheck(schema_of, seed, manifest["replicas"], allowed, companion)


# a part set aside is run again; parts still bad after this many rounds: the run stops
ROUNDS = 3


def _complete(
    run: RunDir,
    scenario_set: ScenarioSet,
    progress: bool,
    figures: FigureWriter | None,
    timeline: bool,
    problems: list[feasibility.Problem],
    scheduler: str | None,
) -> RunOutcome:
    manifest = run.manifest
    seed, replicas = manifest["seed"], manifest["replicas"]
    points = _slice(manifest)
    check = part_check(run, scenario_set)
    session = ReplicaErrors()  # this process's replicas that raised (the first's traceback)

    def simulate(count: int, which) -> None:
        run_montecarlo(
            scenario_set,
            count,
            seed,
            manifest["workers"],
            manifest["executor"],
            progress,
            sink=incident_log.sink(run.write_part, run.parts_dir)
            if manifest.get("incidents")
            else run.write_part,
            done=run.done(),
            points=which,
            scheduler=scheduler,
            incidents=bool(manifest.get("incidents")),
            errors=session,
        )

    try:
        for attempt in range(ROUNDS):
            rejected = run.check_parts(check)  # a bad part is never merged: run again
            if rejected and attempt == ROUNDS - 1:
                path, why = rejected[0]
                raise ScenarioError(
                    str(path), "", f"{why}: a part of this run came out bad {ROUNDS} times "
                    f"(set aside in {run.path / 'rejected-parts'}); check the disk",
                )  # fmt: skip
            if manifest.get("target_ci"):
                which = points if points is not None else range(len(scenario_set.points))
                _adaptive(
                    run, simulate, [p for p in which if scenario_set.points[p].infeasible is None]
                )
            else:
                simulate(replicas, points)
            if run.check_parts(check):
                continue  # parts went bad meanwhile: their replicas run again
            try:
                outcome = finalise(run, scenario_set, figures, timeline, problems, retry=True)
            except PartsRejected:
                continue
            break
        else:
            raise ScenarioError(
                str(run.path / "parts"), "", f"parts of this run came out bad {ROUNDS} times "
                f"(set aside in {run.path / 'rejected-parts'}); check the disk",
            )  # fmt: skip
    except Interrupted as stop:
        run.try_status("interrupted", signal=stop.signal_name)
        raise RunInterrupted(run.path, stop) from None
    except SchedulerLost as lost:  # the finished chunks are kept: say how to complete it
        run.try_status("failed")
        raise lost.of_run(run.path) from None
    except OSError as exc:
        if not is_disk_error(exc):
            problem = run.changed_or(exc)  # the directory changed under the run: bad input
            run.try_status("failed")
            raise problem from None
        run.try_status("failed", error=str(exc)[:300])
        raise disk_full(run, scenario_set, exc) from None
    except BaseException:
        run.try_status("failed")
        raise
    # complete, whatever its replicas did: replicas that raised are said after it
    return _check_errors(outcome, session, _error_columns(outcome))


def disk_full(run: RunDir, scenario_set: ScenarioSet, exc: OSError) -> ScenarioError:
    """The message for a run that ran out of disk: what was kept, how to go on."""
    points = _slice(run.manifest)
    runnable = [
        p for p in scenario_set.points
        if p.infeasible is None and (points is None or p.index in points)
    ]  # fmt: skip
    parts = run.parts()
    kept = sum(count for _, _, count, _ in parts)
    total = run.manifest["replicas"] * len(runnable)
    what = exc.strerror or str(exc).split(". Detail")[0][:200]
    return ScenarioError(
        "--out",
        str(run.path),
        f"the disk is full or not writable ({what}). Kept: {kept:,} of {total:,} replicas in "
        f"{len(parts):,} parts under {run.path / 'parts'}. Free some space and resume with "
        f"`{resume_command(run.path)}`, or copy the run directory to a disk with room "
        f"(cp -r {shlex.quote(str(run.path))} NEW_DIR) and resume there with "
        f"`{trainsim_command()} run --resume NEW_DIR`",
    )


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
    figures: FigureWriter | None = None,
    timeline: bool = False,
    problems: list[feasibility.Problem] | None = None,
    retry: bool = False,
) -> RunOutcome:
    """Merge the parts, write the summaries and figures, and mark the run complete. The
    infeasible points (of the run's slice) are in the summaries, with their reason.

    The parts stay until the status says complete: killed at any instant, the run resumes
    (a resume merges again). SIGINT/SIGTERM meanwhile stop at once (`Interrupted`). A part
    that cannot be read is set aside: PartsRejected with `retry` (the caller runs its
    replicas again), else a ScenarioError naming it."""
    manifest = run.manifest
    points = _slice(manifest)
    infeasible = {
        p.index
        for p in scenario_set.points
        if p.infeasible is not None and (points is None or p.index in points)
    }
    try:
        with stop_on_signals():
            summary, doc = _finalise(run, scenario_set, figures, timeline, points, infeasible)
    except PartsRejected as bad:
        if retry:
            raise
        run.try_status("failed")
        raise ScenarioError(
            str(bad), "", f"a part of {run.path} cannot be read: set aside in "
            f"{run.path / 'rejected-parts'}; `{resume_command(run.path)}` runs its replicas again",
        ) from None  # fmt: skip
    except Interrupted:
        raise
    except OSError as exc:
        problem = run.changed_or(exc)  # the directory changed under the command: bad input
        run.try_status("failed")
        if is_disk_error(exc):
            raise disk_full(run, scenario_set, exc) from None
        raise problem from None
    except BaseException:
        run.try_status("failed")
        raise
    run.set_status("complete", release=False)
    run.remove_parts()  # complete: the table holds every row
    run.release()
    return RunOutcome(scenario_set, summary, doc, run.path, problems or [])


def _finalise(
    run: RunDir,
    scenario_set: ScenarioSet,
    figures: FigureWriter | None,
    timeline: bool,
    points: range | None,
    infeasible: set[int],
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """`finalise`'s work: the merged table, summary.csv, summary.json, timeline, figures."""
    manifest = run.manifest
    seed, replicas = manifest["seed"], manifest["replicas"]
    if manifest.get("incidents"):
        incident_log.merge(run.path)  # before the replica parts go
    table_path = _merge(run, scenario_set, points)
    summary = summaries.summarize_file(table_path, scenario_set.swept_keys)
    light = pd.read_parquet(table_path, columns=["point", "finished", "error"])
    doc = summaries.summary_json(scenario_set, light, summary, replicas, seed)
    present = set(light["point"].unique()) | infeasible
    doc["points"] = [p for p in doc["points"] if p["point"] in present]
    summary = summaries.with_infeasible(summary, scenario_set, infeasible)
    for point in doc["points"]:
        point["replicas"] = int((light["point"] == point["point"]).sum())
        adaptive = manifest.get("adaptive", {}).get(str(point["point"]))
        if adaptive:
            point["ci_half_width_days"] = adaptive["half_width_days"]
    doc["run_dir"] = str(run.path)
    write_regular(run.path / "summary.csv", summary.to_csv(index=False))
    write_regular(run.path / "summary.json", _dumps(doc))
    if timeline:
        first = (scenario_set.feasible or scenario_set.points)[0]
        record = simulate_replica(build_plan(first.scenario), 0, seed, timeline=True)
        write_regular(run.path / "timeline.json", _dumps(chrome_trace(record.timeline)))
    if figures is not None and len(light):  # a slice of infeasible points only has nothing to draw
        run.check_layout()  # figures/ made a link meanwhile: never drawn through
        figures(run, scenario_set, table_path, light, summary)
    return summary, doc


def _merge(run: RunDir, scenario_set: ScenarioSet, points: range | None) -> Path:
    """`run.merge()`; for a slice whose every point is infeasible (no part), an empty
    replicas.parquet with the table's columns, so that the slice merges with the others."""
    wanted = [p for p in scenario_set.points if points is None or p.index in points]
    if run.parts() or any(p.infeasible is None for p in wanted):
        return run.merge()
    path = run.path / "replicas.parquet"
    empty = frame_of([], scenario_set.swept_keys, sweep_types(scenario_set))
    table = pa.Table.from_pandas(empty, preserve_index=False)
    with replacing(path) as tmp:
        pq.write_table(with_provenance(table, run.manifest.get("fingerprint")), tmp)
    return path


def merge_runs(
    run_dirs: list[str | Path], out: str | Path, figures: FigureWriter | None = None
) -> RunOutcome:
    """Join runs of slices of one sweep (`--points I:J`) into one run, equal to the run of
    the whole sweep: same scenario, seed and replicas, disjoint points. Each slice's table
    is checked (a regular, readable parquet file of the run's schema, whole: its fingerprint
    and row count) before anything is written, and copied a batch of rows at a time; slices
    run with --incidents give the merged run their failures too (incidents.parquet)."""
    if isinstance(run_dirs, str | Path) or not isinstance(run_dirs, list | tuple):
        raise arguments.ArgumentError(
            "merge_runs", "run_dirs", f"expected a list of run directories, not {run_dirs!r}"
        )
    run_dirs = [arguments.path("merge_runs", "run_dirs", d) for d in run_dirs]
    out = arguments.path("merge_runs", "out", out)
    runs = [RunDir.open(d, "merge") for d in run_dirs]
    if not runs:
        raise ScenarioError("merge", "", "give the run directories to merge")
    texts = {
        read_bounded(r.path / "scenario.yaml", MAX_SCENARIO_BYTES, "resolved scenario")
        for r in runs
    }
    if len(texts) != 1:
        raise ScenarioError(
            "merge", str(runs[1].path), "the runs differ in scenario, seed or replicas: "
            "only slices of one sweep (the same scenario.yaml) can be merged",
        )  # fmt: skip
    scenario_set = load_scenario(runs[0].path / "scenario.yaml")
    first = runs[0].manifest
    seen: dict[int, Path] = {}
    for r in runs:
        if r.manifest.get("status") != "complete":
            raise ScenarioError(
                "merge", str(r.path), "this run is not complete (--resume it first)"
            )
        for point in _slice_points(r, scenario_set):
            if point in seen:
                raise ScenarioError(
                    "merge", str(r.path), f"sweep point {point} is also in {seen[point]}"
                )
            seen[point] = r.path
    incidents = _slice_incidents(runs)
    extra: dict[str, Any] = {
        "merged_from": [str(r.path) for r in runs],
        "overrides": first.get("overrides") or [],
    }
    if incidents:
        extra["incidents"] = True  # the slices' failures joined: incidents.parquet
    merged = RunDir.create(
        out, scenario_set, first["seed"], first["replicas"], first["executor"], first["workers"],
        extra=extra,
    )  # fmt: skip
    write = incident_log.sink(merged.write_part, merged.parts_dir) if incidents else None
    try:
        try:
            with stop_on_signals():
                for r in runs:
                    table = pq.ParquetFile(r.path / "replicas.parquet")
                    for batch in table.iter_batches(batch_size=MERGE_BATCH):
                        rows = batch.to_pandas()
                        for point, group in rows.groupby("point", sort=True):
                            start = int(group["replica"].iloc[0])
                            if write is None:
                                merged.write_part(int(point), start, group)
                                continue
                            failures = incident_log.read_replicas(
                                r.path / incident_log.FILE, int(point), start, len(group)
                            )
                            write(int(point), start, incident_log.attach(group, failures))
        except Interrupted:
            raise
        except OSError as exc:  # the merged directory changed under the merge: bad input
            problem = merged.changed_or(exc)
            merged.try_status("failed")
            raise problem from None
        except BaseException:
            merged.try_status("failed")
            raise
        infeasible = {p.index for p in scenario_set.points if p.infeasible is not None}
        missing = sorted(set(range(len(scenario_set.points))) - set(seen) - infeasible)
        if missing:
            merged.manifest["missing_points"] = missing
        outcome = finalise(merged, scenario_set, figures)
    except Interrupted as stop:  # copying the slices, or writing the table, summaries, figures
        merged.try_status("interrupted")
        raise MergeInterrupted(merged.path, stop) from None
    return _check_errors(outcome, ReplicaErrors(), _error_columns(outcome))


def _error_columns(outcome: RunOutcome) -> pd.DataFrame:
    """The point, replica and error columns of a finalised run's table."""
    path = Path(str(outcome.run_dir)) / "replicas.parquet"
    return pd.read_parquet(path, columns=["point", "replica", "error"])


def _slice_incidents(runs: list[RunDir]) -> bool:
    """Whether the slices ran with --incidents (then their incident logs are joined): all
    or none, each with a readable incidents.parquet; else a ScenarioError naming the slice."""
    with_log = [r for r in runs if r.manifest.get("incidents")]
    if not with_log:
        return False
    if len(with_log) != len(runs):
        other = next(r for r in runs if not r.manifest.get("incidents"))
        raise ScenarioError(
            "merge", str(other.path), f"this slice ran without --incidents but "
            f"{with_log[0].path} ran with it: the merged run would have the failures of some "
            "points only. Merge slices that all ran with --incidents, or all without",
        )  # fmt: skip
    for r in with_log:
        why = incident_log.file_problem(r.path / incident_log.FILE)
        if why is not None:
            raise ScenarioError(
                str(r.path / incident_log.FILE), "", f"{why}: expected the slice's incident "
                "log (it ran with --incidents); run the slice again to have it",
            )  # fmt: skip
    return True


MAX_SCENARIO_BYTES = 1_000_000
MERGE_BATCH = 10_000  # rows of a slice's table in memory at a time


def _slice_points(run: RunDir, scenario_set: ScenarioSet) -> list[int]:
    """The sweep points of a slice's replicas.parquet, after checking that it is a regular,
    readable parquet file with the run's columns and whole rows (each point's replicas
    0..n-1 in order, the run's seed); else a ScenarioError naming the file."""
    path = run.path / "replicas.parquet"

    def bad(why: str) -> ScenarioError:
        return ScenarioError(
            str(path), "", f"{why}: expected the replica table of a complete slice; run "
            f"`{resume_command(run.path)}` if its parts are still there, else run the slice again",
        )  # fmt: skip

    try:
        info = path.stat()
    except OSError as exc:
        raise bad(f"cannot read it ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise bad("not a regular file")
    try:
        file = pq.ParquetFile(path)
        points = file.read(columns=["point", "replica", "seed"]).to_pandas()
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise bad(f"not a readable parquet file ({type(exc).__name__}: {str(exc)[:200]})") from None
    why = run.table_problem()
    if why is not None:
        raise bad(why)
    found = sorted(int(p) for p in points["point"].unique())
    allowed = part_check(run, scenario_set)
    for point in found:
        if not allowed.points(point) and not (
            0 <= point < len(scenario_set.points) and run.manifest.get("merged_from")
        ):
            raise bad(f"rows of sweep point {point}, which this slice does not run")
        schema = file.schema_arrow.remove_metadata()
        expected = allowed.schema_of(point)
        if not schema.equals(expected):
            raise bad(schema_difference(schema, expected) or "another schema")
        replicas = points.loc[points["point"] == point, "replica"].tolist()
        if replicas != list(range(len(replicas))) or len(replicas) > run.manifest["replicas"]:
            raise bad(f"the replicas of point {point} are not 0..n-1 in order")
    if len(points) and not (points["seed"] == run.manifest["seed"]).all():
        raise bad(f"rows of another seed than the run's {run.manifest['seed']}")
    return found


def _dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v))
