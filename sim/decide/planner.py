"""Planning under a deadline (`trainsim plan`): the configuration of a grid that minimises
(or maximises) an objective subject to P(time to train <= deadline) >= quantile, found by
racing the points (`sim.decide.racing`) on the Monte Carlo: `plan` and `resume_plan` run
the rounds' replicas, stream them into a run directory, and write plan.json
(`sim.decide.plan_outcome`) and, when handed its drawer, the Pareto figure.

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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from sim.decide.plan_outcome import Plan, outcome
from sim.decide.racing import FIRST_REPLICAS, MAX_REPLICAS, PRECISION, Round, race
from sim.model import feasibility
from sim.model.columns import better_direction
from sim.model.scenario import load_scenario
from sim.model.scenario_set import ScenarioError, ScenarioSet
from sim.model.schema import MAX_COUNT, MAX_DAYS
from sim.runs import arguments, summaries
from sim.runs.api import RunInterrupted, finalise, part_check, replicas_raised
from sim.runs.dask_executor import SchedulerLost, check_scheduler_option
from sim.runs.files import write_regular
from sim.runs.manifest import read_manifest
from sim.runs.montecarlo import Interrupted, ReplicaErrors, default_workers
from sim.runs.montecarlo import _ignore_for_a_while as ignore_for_a_while
from sim.runs.montecarlo import run as run_montecarlo
from sim.runs.progress import PlainProgress, TimeColumn, progress_display
from sim.runs.results import RunDir

# draws a plan's figure from plan.json (`sim.show.plan_plots.pareto_figure`)
ParetoFigure = Callable[[dict[str, Any]], Figure]

# What the race reads of each replica (the rest of the row goes to the run directory only).
RACE_COLUMNS = ["point", "replica", "error", "finished", "time_to_train_days", "cost_usd"]


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
    Arguments of the wrong type or out of range raise `sim.runs.arguments.ArgumentError`.
    """
    arguments.scenario("plan", scenario)
    deadline_days = arguments.number("plan", "deadline_days", deadline_days, 0.0, MAX_DAYS, True)
    quantile = arguments.number("plan", "quantile", quantile, 0.0, 1.0, low_open=True)
    precision = arguments.number("plan", "precision", precision, 0.0, 1e6, low_open=True)
    objective = arguments.choice("plan", "objective", objective, tuple(summaries.METRICS))
    vary = arguments.texts("plan", "vary", vary, "cluster.nodes=64,128") or []
    overrides = arguments.texts("plan", "overrides", overrides, "cluster.spare_nodes=8")
    replicas_first = arguments.whole_number("plan", "replicas_first", replicas_first, 1, MAX_COUNT)
    replicas_max = arguments.whole_number("plan", "replicas_max", replicas_max, 2, MAX_COUNT)
    seed, workers = arguments.seed("plan", seed), arguments.workers("plan", workers)
    executor = arguments.executor("plan", executor)
    out = None if out is None else arguments.path("plan", "out", out)
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
        session = ReplicaErrors()  # replicas that raised: said once, by ReplicasRaised
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
            errors=session,
        )
        if run is not None:  # the round's rows as the parts hold them, simulated now or before
            kept = _rows_of_parts(run, points, start, stop, columns)
        rows = pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=columns)
        raised = replicas_raised(scenario_set, session, rows, run.path if run else None)
        if raised is not None:  # a plan on replicas that raise would answer on the others
            raise raised
        return rows

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
