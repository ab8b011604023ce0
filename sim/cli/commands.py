"""The `trainsim` command: parses arguments and calls library functions.

Exit codes: 0 success, 2 bad input (scenario or arguments), 1 internal error.
Tables go to stdout; progress and warnings to stderr; `--json` prints only JSON.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shlex
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, NoReturn

import click
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sim.cli import arguments
from sim.cli.data_commands import fit as fit_command
from sim.cli.data_commands import forecast as forecast_command
from sim.decide import analysis, answer, compare, planner
from sim.model import feasibility, perf
from sim.model.columns import SUMMARY_METRICS, unit_of
from sim.model.scenario import ScenarioError, ScenarioSet, load_scenario
from sim.runs import summaries
from sim.runs.api import (
    MergeInterrupted,
    RunInterrupted,
    RunOutcome,
    merge_runs,
    resume_run,
    run_scenario,
)
from sim.runs.results import protect_run_files, read_manifest, resume_command, trainsim_command
from sim.show import compare_figure, plan_plots
from sim.show import console as screen
from sim.show import report as run_report
from sim.show.run_figures import write_run_figures

# the output root of run, optimize, plan and merge when --out is not given (else results/)
RESULTS_ENV = arguments.RESULTS_ENV


def _exit_stopped() -> NoReturn:
    """Exit 130 after a stop. SIGINT and SIGTERM are ignored from here on: Python puts its
    own handlers back to the default while it shuts down, and another Ctrl-C in that last
    moment would kill the process (exit -2) after the stop was handled."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(signum, signal.SIG_IGN)
    sys.exit(130)


def _say_interrupted(stop: RunInterrupted, tail: str = "", counted: bool = True) -> NoReturn:
    """Say what a stopped run kept (`counted`: how many of its replicas) and the command that
    resumes it (as printed, it runs: trainsim's full path when it is not on PATH, the
    directory quoted), then exit 130."""
    cause = stop.cause
    kept = (
        f"{cause.done:,} of {cause.total:,} replicas done and kept in"
        if counted and cause.total
        else "the replicas run so far are kept in"
    )
    print(
        f"interrupted ({cause.signal_name}): {kept} {stop.run_dir}\n"
        f"resume with: {resume_command(stop.run_dir)}{tail}",
        file=sys.stderr,
    )
    _exit_stopped()


def _refuse_with_resume(**given: Any) -> None:
    """`run --resume` takes what a run does from its directory: an option that would change
    it is refused (exit 2), never silently ignored. (--no-figures is honoured by a run's
    resume; a plan writes only figures/pareto.png, its answer, either way.)"""
    names = {"points_slice": "--points", "target_ci": "--target-ci", "timeline": "--timeline",
             "incidents": "--incidents"}  # fmt: skip
    refused = [names[k] for k, v in given.items() if v not in (None, False)]
    ctx = click.get_current_context()
    if ctx.get_parameter_source("out") == click.core.ParameterSource.COMMANDLINE:
        refused.append("--out")  # the run's own directory is written
    if refused:
        raise click.UsageError(
            "--resume finishes RUN_DIR as it was started (its points, target CI, timeline, "
            f"incident log and directory come from its run.json): drop {', '.join(refused)}"
        )


scenario_argument = click.argument("scenario", type=click.Path(path_type=Path))
set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a key, e.g. --set checkpoint.interval_steps=500 (repeatable).",
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON on stdout and nothing else."
)

# --out of every command that writes a run directory
out_option = click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("results"),
    envvar=RESULTS_ENV,
    show_default=True,
    help=f"Results root [${RESULTS_ENV}, else results].",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trainsim")
def app() -> None:
    """trainsim: how long will this training run really take, and what will it cost?"""


executor_option = click.option(
    "--executor",
    type=click.Choice(["serial", "processes", "dask"]),
    help="Where replicas run [scenario's simulation.executor, else processes].",
)
scheduler_option = click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="With --executor dask: a running Dask scheduler, e.g. tcp://host:8786 "
    "[a local cluster of --workers processes].",
)


@app.command()
@click.argument("scenario", required=False, type=click.Path(path_type=Path))
@click.option(
    "--replicas",
    type=arguments.REPLICAS,
    help="Replicas per sweep point [scenario's simulation.replicas]; at most 1,000,000 per "
    "point and 10,000,000 per run.",
)
@click.option(
    "--seed",
    type=arguments.SEED,
    help="Base seed [scenario's simulation.seed].",
)
@click.option(
    "--workers",
    type=arguments.WORKERS,
    help="Worker processes [all cores]; with --scheduler, the cluster's workers (it sizes chunks).",
)
@executor_option
@scheduler_option
@set_option
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=V1,V2,...",
    help="Sweep a key, e.g. --param checkpoint.interval_steps=500,1000 (repeatable).",
)
@out_option
@click.option(
    "--points",
    "points_slice",
    type=arguments.POINTS,
    metavar="I:J",
    help="Run sweep points I..J-1 only (a slice for a job array; join with trainsim merge).",
)
@click.option(
    "--target-ci",
    type=arguments.SHARE,
    metavar="REL",
    help="Add replicas per point until the 95%% half-width of mean time to train is at most "
    "REL x the mean (at most --replicas).",
)
@click.option(
    "--resume",
    type=click.Path(path_type=Path),
    metavar="RUN_DIR",
    help="Finish an interrupted run, plan or optimize (instead of SCENARIO): only its "
    "missing replicas run.",
)
@json_option
@click.option("--timeline", is_flag=True, help="Also write timeline.json (replica 0) for Perfetto.")
@click.option(
    "--incidents",
    is_flag=True,
    help="Also write incidents.parquet: every replica's failures, the log trainsim fit reads.",
)
@click.option("--figures/--no-figures", default=True, show_default=True, help="Write figures/.")
@click.option(
    "--progress/--no-progress", default=True, show_default=True, help="Progress bar on stderr."
)
def run(
    scenario,
    replicas,
    seed,
    workers,
    executor,
    scheduler,
    overrides,
    params,
    out,
    points_slice,
    target_ci,
    resume,
    as_json,
    timeline,
    incidents,
    figures,
    progress,
) -> None:
    """Monte Carlo over seeded replicas (and sweep points); writes OUT/<name>/<run-id>/.

    Ctrl-C (or SIGTERM) keeps what finished and exits 130; --resume RUN_DIR completes it.
    """
    if (scenario is None) == (resume is None):
        raise click.UsageError("give a SCENARIO file, or --resume RUN_DIR (not both)")
    if resume is not None and (replicas or seed is not None or overrides or params):
        raise click.UsageError(
            "--resume takes the scenario, seed and replicas from RUN_DIR: "
            "drop --replicas, --seed, --set and --param"
        )
    if resume is not None:
        _refuse_with_resume(
            points_slice=points_slice, target_ci=target_ci, timeline=timeline, incidents=incidents
        )
    if resume is not None and planner.is_plan_run(resume):  # a plan's run: its race resumes
        _plan_answer(lambda: planner.resume_plan(resume, workers, executor, progress, scheduler,
                                                 plan_plots.pareto_figure), as_json)  # fmt: skip
        return
    question = optimize_question(resume) if resume is not None else None
    try:
        if resume is not None:
            outcome = resume_run(resume, workers, executor, progress, _drawn(figures), scheduler)
        else:
            loaded = _load(scenario, overrides, params)
            total = feasibility.check_replicas(loaded, replicas, points_slice)
            if progress and total > 1_000_000:  # listing them takes a moment: say so at once
                print(f"{total:,} replicas to run: preparing them...", file=sys.stderr)
            outcome = run_scenario(
                loaded,
                replicas=replicas,
                seed=seed,
                workers=workers,
                executor=executor,
                out=out,
                progress=progress,
                figures=_drawn(figures),
                timeline=timeline,
                scheduler=scheduler,
                points=points_slice,
                target_ci=target_ci,
                incidents=incidents,
            )
    except RunInterrupted as stop:
        _say_interrupted(stop)
    if question is not None:  # the run of `trainsim optimize`: its answer
        _optimize_answer(outcome, question, as_json)
        return
    _warn(outcome.problems)
    if as_json:
        print(json.dumps(outcome.summary_doc, default=_json_default))
        return
    _print_run(outcome)


@app.command()
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(path_type=Path))
@set_option
def validate(scenarios, overrides) -> None:
    """Check scenario files against the schema and the model; report every bad file, exit 2
    if any is bad."""
    bad = 0
    for path in scenarios:
        try:
            loaded = _load(path, overrides)
            hopeless = feasibility.check(loaded)
        except ScenarioError as exc:
            bad += 1
            print(f"error: {exc}", file=sys.stderr)
            continue
        points = len(loaded.points)
        extra = f", {points} sweep points" if points > 1 else ""
        print(f"ok: {path} ({loaded.name}{extra})")
        _warn_infeasible(loaded)
        _warn(hopeless)
    if bad:
        if len(scenarios) > 1:
            print(f"{bad} of {len(scenarios)} scenario files are invalid", file=sys.stderr)
        click.get_current_context().exit(2)


@app.command()
@scenario_argument
@set_option
@click.option(
    "--run",
    "run_dir",
    type=click.Path(path_type=Path),
    help="A run of this scenario (`trainsim run`'s directory): the cost with failures "
    "its replicas measured, beside Daly's first-order estimate.",
)
@json_option
def calc(scenario, overrides, run_dir, as_json) -> None:
    """The deterministic calculator: step time, ideal time-to-train, checkpoint cost, Young/Daly, cost."""
    loaded = _load(scenario, overrides)
    _warn(feasibility.check(loaded))
    # a point that cannot run has no calculation: its reason instead
    results = [(p.params, p.infeasible or perf.calculate(p.scenario)) for p in loaded.points]
    measured = _run_costs(run_dir, loaded) if run_dir is not None else {}
    if as_json:
        doc = {
            "scenario": loaded.name,
            "points": [
                {"params": params, "infeasible": c}
                if isinstance(c, str)
                else {
                    "params": params,
                    **{k: _finite(v) for k, v in dataclasses.asdict(c).items()},
                    **({"run_cost_usd": measured[i]} if i in measured else {}),
                }
                for i, (params, c) in enumerate(results)
            ],
        }
        print(json.dumps(doc))
        return
    console = _console()
    for i, (params, c) in enumerate(results):
        if isinstance(c, str):
            console.print(f"{loaded.name}  {params}: [bold]infeasible[/bold]: {escape(c)}")
            continue
        title = f"{loaded.name}" + (f"  {params}" if params else "")
        table = Table(title=title, show_header=False, title_justify="left")
        screen.text_column(table, "quantity")
        table.add_column("value", justify="right")
        for label, value in run_report.calculation_rows(c):
            table.add_row(label, value)
        if i in measured:
            cost = measured[i]
            table.add_row(
                f"cost with failures (the run: {cost['replicas']:,} replicas)",
                f"mean ${cost['mean']:,.0f}, p95 ${cost['p95']:,.0f}",
            )
        screen.show(console, table)
        _print_step_parts(console, c)
        if c.efficiency_warning:
            print(f"warning: {c.efficiency_warning}", file=sys.stderr)


def _run_costs(run_dir: Path, loaded: ScenarioSet) -> dict[int, dict[str, float]]:
    """calc --run: per sweep point, the cost (`cost_usd`) the run's replicas measured, mean
    and p95 over the replicas without an error; the run must be of this scenario, point for
    point (its name and sweep points)."""
    run = compare.open_run(run_dir, "(--run)")
    table = run.ok
    if run.name != loaded.name or table["point"].max() >= len(loaded.points):
        raise click.BadParameter(
            f"{run_dir} is a run of {run.name!r} with {int(run.table['point'].max()) + 1} "
            f"sweep point(s), not of {loaded.name!r} with {len(loaded.points)}: give a run "
            "of this scenario",
            param_hint="--run",
        )
    if "cost_usd" not in table:
        raise click.BadParameter(
            f"{run_dir}: the replica table has no cost_usd column", param_hint="--run"
        )
    return {
        int(point): {
            "replicas": len(rows),
            "mean": float(rows["cost_usd"].mean()),
            "p95": float(rows["cost_usd"].quantile(0.95)),
        }
        for point, rows in table.groupby("point")
    }


def _print_step_parts(console: Console, c: perf.Calculation) -> None:
    """calc: where one step's time goes, and with measured points the fit's residuals."""
    if c.step_parts_s:
        step = sum(c.step_parts_s.values())
        parts = Table(title="where the step's time goes", title_justify="left")
        for column in ("part", "seconds", "share"):
            parts.add_column(column, justify="left" if column == "part" else "right")
        for name, seconds in c.step_parts_s.items():
            parts.add_row(name, f"{seconds:.4g}", f"{seconds / step:.1%}")
        console.print(parts)
    if c.fitted_points:
        fit = Table(
            title=f"fitted to the measured points: compute efficiency "
            f"{c.compute_efficiency:.4f}, overlap {c.fitted_overlap:.4f}",
            title_justify="left",
        )
        for column in ("measured at", "measured MFU", "fitted MFU", "residual"):
            fit.add_column(column, justify="left" if column == "measured at" else "right")
        for p in c.fitted_points:
            fit.add_row(
                p["where"],
                f"{p['measured_mfu']:.4f}",
                f"{p['fitted_mfu']:.4f}",
                f"{p['fitted_mfu'] - p['measured_mfu']:+.4f}",
            )
        console.print(fit)


@app.command()
@scenario_argument
@click.option(
    "--param",
    "params",
    multiple=True,
    required=True,
    metavar="KEY=V1,V2,...",
    help="The key to optimise and its candidate values, e.g. checkpoint.interval_minutes=10,20,40.",
)
@set_option
@click.option("--replicas", type=arguments.REPLICAS_2, help="Replicas per candidate.")
@click.option("--seed", type=arguments.SEED, help="Base seed.")
@click.option("--workers", type=arguments.WORKERS, help="Worker processes [all cores].")
@click.option(
    "--metric",
    default="time_to_train_days",
    show_default=True,
    help="Metric to optimise (goodput and effective_mfu are maximised, others minimised).",
)
@click.option(
    "--maximize",
    "direction",
    flag_value="max",
    default=None,
    help="Higher is better for --metric (the default for goodput, effective_mfu).",
)
@click.option(
    "--minimize",
    "direction",
    flag_value="min",
    help="Lower is better for --metric (the default for times, costs, counts).",
)
@click.option(
    "--statistic", default="mean", show_default=True, help="mean, or a percentile such as p95."
)
@out_option
@json_option
@click.option("--progress/--no-progress", default=True, show_default=True)
def optimize(
    scenario,
    params,
    overrides,
    replicas,
    seed,
    workers,
    metric,
    direction,
    statistic,
    out,
    as_json,
    progress,
) -> None:
    """Sweep one key and report the value with the best mean (or percentile) of a metric."""
    if len(params) != 1:
        raise click.BadParameter("optimize one key at a time", param_hint="--param")
    if metric not in summaries.METRICS:
        raise click.BadParameter(
            f"unknown metric {metric!r}; one of {', '.join(summaries.METRICS)}",
            param_hint="--metric",
        )
    try:
        analysis.check_statistic(statistic)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--statistic") from None
    # everything is checked before anything is simulated or written
    loaded = _load(scenario, overrides, params)
    key = params[0].partition("=")[0].strip()
    candidates = loaded.resolved["sweep"][key]
    # a key swept with one value (a --set figure a kind sweep holds) is no second axis
    if loaded.varied_keys != [key]:
        others = [k for k in loaded.varied_keys if k != key]
        raise click.BadParameter(
            f"optimize needs at least two candidate values of {key}, got {len(candidates)}"
            + (
                f", and no other swept key with several values (the scenario sweeps "
                f"{', '.join(others)})"
                if others
                else ""
            ),
            param_hint="--param",
        )
    if replicas is None and loaded.base.simulation.replicas < 2:
        raise click.BadParameter(
            "optimize needs at least 2 replicas per candidate", param_hint="--replicas"
        )
    # values that cannot run are listed as infeasible, never simulated nor chosen
    infeasible = {p.params[key]: p.infeasible for p in loaded.points if p.infeasible is not None}
    feasibility.infeasible_everywhere(loaded)  # none can run: bad input, as for run and plan
    if len(loaded.feasible) < 2:
        raise click.BadParameter(
            f"optimize needs at least two candidate values of {key} that can run, got "
            f"{len(loaded.feasible)}; infeasible: "
            + "; ".join(f"{answer.value_text(v)}: {reason}" for v, reason in infeasible.items()),
            param_hint="--param",
        )
    feasibility.check(loaded)
    feasibility.check_replicas(loaded, replicas)
    undefined = feasibility.metric_problem(loaded, metric)
    if undefined is not None:
        raise click.BadParameter(undefined, param_hint="--metric")
    question = {"key": key, "metric": metric, "statistic": statistic, "direction": direction}
    try:
        outcome = run_scenario(
            loaded,
            replicas=replicas,
            seed=seed,
            workers=workers,
            out=out,
            progress=progress,
            note={"optimize": question},  # a resume of the run answers it
        )
    except RunInterrupted as stop:
        _say_interrupted(stop, " (it runs only the missing replicas and prints this answer)")
    _optimize_answer(outcome, question, as_json)


def optimize_question(run_dir: Path) -> dict | None:
    """The question `trainsim optimize` asked of the run in `run_dir` (key, metric,
    statistic, direction), or None: not an optimize run, or not a readable run directory."""
    try:
        question = read_manifest(Path(run_dir), "a run directory").get("optimize")
    except ScenarioError:
        return None
    return question if isinstance(question, dict) else None


def _optimize_answer(outcome: RunOutcome, question: dict, as_json: bool) -> None:
    """The best value of the optimised key, as a table and a sentence (or JSON)."""
    key, metric = question.get("key"), question.get("metric")
    statistic, direction = question.get("statistic", "mean"), question.get("direction")
    loaded = outcome.scenario_set
    if key not in loaded.swept_keys or metric not in summaries.METRICS:
        raise ScenarioError(
            str(outcome.run_dir / "run.json"), "optimize", f"asks for {key!r} and {metric!r}: "
            f"expected a key the run sweeps ({', '.join(loaded.swept_keys)}) and a metric",
        )  # fmt: skip
    infeasible = {p.params[key]: p.infeasible for p in loaded.points if p.infeasible is not None}
    _warn(outcome.problems)
    try:
        best = analysis.optimize(outcome.table, key, metric, statistic, direction, infeasible)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--param/--statistic") from None
    if as_json:
        doc = {k: v for k, v in dataclasses.asdict(best).items() if k != "points"}
        records = best.points.to_dict(orient="records")
        doc["points"] = [{k: _finite(v) for k, v in row.items()} for row in records]
        doc["run_dir"] = str(outcome.run_dir)
        print(json.dumps(doc, default=_json_default))
        return
    console = _console()
    goal = "highest" if best.direction == "max" else "lowest"
    words = f"{statistic} {answer.metric_words(metric)}"  # mean cost, p95 time to train
    points = best.points.to_dict(orient="records")
    # one unit for the values and one for the differences, as each column reads best
    unit = answer.common_unit(metric, [row[statistic] for row in points])
    differences = [row["difference"] for row in points if row["verdict"] != "infeasible"]
    difference_unit = answer.common_unit(metric, differences)

    def value(number: float) -> str:
        return answer.readable(metric, number, unit=unit)

    def worse_by(number: float, low: float, high: float) -> str:
        text = answer.readable(metric, number, unit=difference_unit)
        return f"{text} ({answer.readable_interval(metric, low, high, signed=False)})"

    table = Table(
        title=f"{outcome.scenario_set.name}: {words} by {key} ({goal} is best)",
        title_justify="left",
    )
    for column in [key, words, "95% CI", "worse than best by\n(paired 95% CI)"]:
        table.add_column(column, justify="right")
    screen.text_column(table, "verdict")
    infeasible_lines = []
    for row in points:
        if row["verdict"] == "infeasible":
            table.add_row(answer.value_text(row[key]), "—", "—", "", "infeasible")
            infeasible_lines.append(
                f"infeasible, not simulated: {key}={answer.value_text(row[key])}: "
                f"{row['infeasible']}"
            )
            continue
        tied = row["verdict"] in ("best", "tied for best")
        table.add_row(
            answer.value_text(row[key]),
            value(row[statistic]),
            answer.readable_interval(metric, row["ci_low"], row["ci_high"], signed=False),
            ""
            if tied
            else worse_by(row["difference"], row["difference_ci_low"], row["difference_ci_high"]),
            row["verdict"],
        )
    screen.show(console, table)
    for line in infeasible_lines:
        console.print(line, highlight=False, markup=False)
    if best.best is None:
        values = ", ".join(answer.value_text(v) for v in best.tied)
        console.print(
            f"no single best {key}: {values} tie at {words} {value(best.best_value)}"
            + (
                f"; the next, {answer.value_text(best.runner_up)}, is worse by "
                f"{answer.readable(metric, best.difference)}"
                if best.runner_up is not None
                else ""
            ),
            highlight=False,
        )
    else:
        low, high = best.difference_ci
        sure = (
            "distinguishable"
            if low > 0
            else "not distinguishable at 95% (more replicas would tell)"
        )
        console.print(
            f"best {key} = {answer.value_text(best.best)}: {words} {value(best.best_value)} "
            f"(95% CI {answer.readable_interval(metric, *best.best_ci, signed=False)}); "
            f"runner-up {answer.value_text(best.runner_up)} is worse by "
            f"{answer.readable(metric, best.difference)} "
            f"(paired 95% CI {answer.readable_interval(metric, low, high, signed=False)}: {sure})",
            highlight=False,
        )
    console.print(f"results: {outcome.run_dir}")


@app.command(name="plan")
@scenario_argument
@click.option(
    "--vary",
    "vary",
    multiple=True,
    required=True,
    metavar="KEY=V1,V2,...",
    help="A key to search and its candidate values, e.g. --vary cluster.spare_nodes=0,4,8 "
    "(repeatable: the grid is the cartesian product, with any sweep the scenario has).",
)
@click.option(
    "--deadline-days",
    type=arguments.DAYS,
    required=True,
    help="The deadline: time to train must be at most this many days ...",
)
@click.option(
    "--quantile",
    type=arguments.SHARE,
    default=0.95,
    show_default=True,
    help="... in at least this share of replicas (unfinished ones miss it).",
)
@click.option(
    "--objective",
    default="cost_usd",
    show_default=True,
    help="Metric whose mean to optimise (goodput and effective_mfu are maximised, others minimised).",
)
@click.option(
    "--replicas-first",
    type=arguments.REPLICAS_2,
    default=planner.FIRST_REPLICAS,
    show_default=True,
    help="Replicas every point gets in the first round (each round doubles them).",
)
@click.option(
    "--replicas-max",
    type=arguments.REPLICAS_2,
    default=planner.MAX_REPLICAS,
    show_default=True,
    help="Replicas a point gets at most.",
)
@click.option(
    "--precision",
    type=arguments.POSITIVE,
    default=planner.PRECISION,
    show_default=True,
    metavar="REL",
    help="Stop once every point left is known to be within ±REL x the mean of the best "
    "clearly feasible point.",
)
@set_option
@click.option("--seed", type=arguments.SEED, help="Base seed.")
@click.option("--workers", type=arguments.WORKERS, help="Worker processes [all cores].")
@executor_option
@scheduler_option
@out_option
@json_option
@click.option(
    "--progress/--no-progress", default=True, show_default=True, help="Progress bar on stderr."
)
def plan_command(
    scenario,
    vary,
    deadline_days,
    quantile,
    objective,
    replicas_first,
    replicas_max,
    precision,
    overrides,
    seed,
    workers,
    executor,
    scheduler,
    out,
    as_json,
    progress,
) -> None:
    """Search several keys at once for the configuration with the best mean --objective
    among those that finish within --deadline-days in at least --quantile of replicas.

    Points race: every point starts with --replicas-first replicas (the same replica ids
    everywhere: common random numbers); each round doubles them for the points still in
    contention, dropping those clearly infeasible or clearly dominated. Writes
    OUT/<name>/<run-id>/ with replicas.parquet, plan.json and figures/pareto.png.
    """
    if objective not in summaries.METRICS:
        raise click.BadParameter(
            f"unknown metric {objective!r}; one of {', '.join(summaries.METRICS)}",
            param_hint="--objective",
        )
    ctx = click.get_current_context()
    if (
        replicas_first > replicas_max
        and ctx.get_parameter_source("replicas_first") == click.core.ParameterSource.COMMANDLINE
    ):  # the default first round is cut to a smaller --replicas-max; a given one is not
        raise click.BadParameter(
            f"{replicas_first} is more than --replicas-max {replicas_max}: the first round "
            "cannot have more replicas than a point gets at most",
            param_hint="--replicas-first",
        )
    loaded = _load(scenario, overrides, planner.parse_vary(str(scenario), vary))
    _plan_answer(
        lambda: planner.plan(
            loaded,
            deadline_days,
            quantile,
            objective,
            replicas_first=replicas_first,
            replicas_max=replicas_max,
            precision=precision,
            seed=seed,
            workers=workers,
            executor=executor,
            scheduler=scheduler,
            out=out,
            progress=progress,
            pareto=plan_plots.pareto_figure,
        ),
        as_json,
    )


def _plan_answer(race, as_json: bool) -> None:
    """Run a plan (new or resumed) and print its answer; interrupted: what was kept and the
    command that resumes it (the replicas run so far are not run again), exit 130."""
    try:
        result = race()
    except RunInterrupted as stop:
        if stop.complete:  # stopped while it let go of the finished directory
            report = f"{trainsim_command()} report {shlex.quote(str(stop.run_dir))}"
            print(
                f"interrupted ({stop.cause.signal_name}) once the plan was complete: its "
                f"answer is in {stop.run_dir} ({report})",
                file=sys.stderr,
            )
            _exit_stopped()
        _say_interrupted(
            stop, " (it reuses them and gives the plan of an uninterrupted run)", counted=False
        )
    _warn(result.problems)
    if as_json:
        print(json.dumps(result.doc))
        return
    _print_plan(result.doc)


def _print_plan(doc: dict) -> None:
    console = _console()
    keys, objective, q = doc["varied_keys"], doc["objective"], doc["quantile"]
    deadline = f"{doc['deadline_days']:g} days"
    goal = "highest" if doc["direction"] == "max" else "lowest"
    console.print(
        f"{doc['scenario']}: the {goal} {answer.objective_words(objective)} with "
        f"P(time to train ≤ {deadline}) ≥ "
        f"{q:g}, over {len(doc['candidates'])} points of {' × '.join(keys)}"
    )

    def params(row: dict) -> str:
        return "  ".join(f"{k}={answer.value_text(row[k])}" for k in keys)

    def share(row: dict) -> str:
        if row["p_meet"] is None:  # never ran: its configuration cannot
            return "—"
        return f"{row['p_meet']:.3f} [{row['p_meet_low']:.3f}, {row['p_meet_high']:.3f}]"

    def plus_minus(value, low, high) -> str:
        """value ± the half-width of its (symmetric) 95% interval."""
        if value is None:
            return "—"
        text = _fmt_metric(objective, value, unit=False)
        if low is None or high is None:
            return text
        return f"{text} ± {_fmt_metric(objective, (high - low) / 2, unit=False)}"

    def mean_ci(row: dict) -> str:
        return plus_minus(row["objective_mean"], row["objective_ci_low"], row["objective_ci_high"])

    quantile_name = f"p{q * 100:g}"
    chosen = doc["chosen"]
    if chosen is not None:
        table = Table(title=f"chosen: {params(chosen)}", show_header=False, title_justify="left")
        screen.text_column(table, "quantity")
        screen.text_column(table, "value")
        table.add_row(
            f"{answer.objective_words(objective)} ± 95% CI",
            f"{mean_ci(chosen)} ({_fmt_metric(objective, chosen['objective_ci_low'])} – "
            f"{_fmt_metric(objective, chosen['objective_ci_high'])})",
        )
        table.add_row(
            f"P(time to train ≤ {deadline}) [95% CI]",
            f"{share(chosen)} over {chosen['replicas']:,} replicas",
        )
        p50_p95 = answer.same_decimals(
            [chosen["time_to_train_days_p50"], chosen["time_to_train_days_p95"]]
        )
        table.add_row("time to train p50 / p95", f"{p50_p95[0]} / {p50_p95[1]} days")
        screen.show(console, table)
        if chosen["p_meet_low"] < q:
            console.print(
                f"note: its P(meet) is {chosen['p_meet']:.3f} ≥ {q:g}, but the 95% interval "
                f"reaches down to {chosen['p_meet_low']:.3f}: more replicas (--replicas-max) "
                "would confirm it"
            )
    else:
        best = doc["highest_p_meet"]
        console.print(
            f"[bold]no configuration meets the deadline[/bold]: no point finishes within "
            f"{deadline} in at least {q:.0%} of replicas. The closest, {params(best)}, does in "
            f"{best['p_meet']:.1%} of {best['replicas']:,} replicas (95% CI "
            f"{best['p_meet_low']:.1%}–{best['p_meet_high']:.1%}); its {quantile_name} time to "
            f"train is {_fmt(best['time_to_train_days_at_quantile'])} days."
        )
    unit = unit_of(objective)
    table = Table(
        title=f"every point, best first ({answer.objective_words(objective)}"
        f"{f' in {unit}' if unit else ''}; "
        "± and [ ]: 95% confidence intervals)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for key in keys:  # the last part of the key, one word a line
        table.add_column(key.split(".")[-1].replace("_", "\n"), justify="right")
    for column in ["replicas", "mean ± CI", "P(meet) [CI]", f"{quantile_name} days"]:
        table.add_column(column, justify="right")
    screen.text_column(table, "status")
    table.add_column("out at\nround", justify="right")
    # the points that cannot run at all (the others marked infeasible miss the deadline):
    # one line per reason, naming the swept values its points share
    cannot = [row for row in doc["candidates"] if not row["replicas"]]
    below: list[str] = []  # printed under the table, each line whole
    if cannot:
        reasons: dict[str, list[dict]] = {}
        for row in cannot:
            reasons.setdefault(row.get("reason") or "", []).append(row)
        lines = []
        for reason, rows in reasons.items():
            shared = {k: rows[0][k] for k in keys if all(r[k] == rows[0][k] for r in rows)}
            where = "  ".join(f"{k}={answer.value_text(v)}" for k, v in shared.items())
            count = f"{len(rows)} points" if len(rows) > 1 else "1 point"
            lines.append(
                f"cannot run, not simulated ({count}{': ' + where if where else ''}): "
                f"{escape(reason)}"
            )
        below = lines
    # the quantile's days alike in decimals in both tables, apart where points differ
    day_decimals = answer.decimals_for(
        [row["time_to_train_days_at_quantile"] for row in doc["candidates"] if row["replicas"]],
        distinct=True,
    )

    def days(value) -> str:
        return answer.with_decimals(value, day_decimals)

    for row in doc["candidates"]:
        if not row["replicas"]:
            continue  # below the table
        table.add_row(
            *(answer.value_text(row[k]) for k in keys),
            f"{row['replicas']:,}",
            mean_ci(row),
            share(row),
            days(row["time_to_train_days_at_quantile"]),
            answer.plan_status({**row, "dropped_round": None}, doc),
            "" if row["dropped_round"] is None else str(row["dropped_round"]),
        )
    screen.show(console, table)
    for line in below:
        console.print(line, highlight=False)
    front = Table(
        title=f"time-cost Pareto front ({quantile_name} time to train vs mean cost)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for key in keys:
        front.add_column(key.split(".")[-1].replace("_", "\n"), justify="right")
    for column in [f"{quantile_name} days", "mean cost", "P(meet)"]:
        front.add_column(column, justify="right")
    screen.text_column(front, "against the chosen point")
    for row in doc["pareto"]:
        front.add_row(
            *(answer.value_text(row[k]) for k in keys),
            days(row["time_to_train_days_at_quantile"]),
            _fmt_metric("cost_usd", row["cost_usd_mean"]),
            f"{row['p_meet']:.3f}",
            # not its status: `dominated` there means worse on the objective alone, and a
            # faster, costlier point is rightly on the time-cost front
            answer.front_role(row, doc),
        )
    screen.show(console, front)
    spent, full = doc["replicas_spent"], doc["replicas_full_grid"]
    ran = [row for row in doc["candidates"] if row["replicas"]]
    console.print(
        f"replicas: the search ran {spent:,}; a full grid at the same precision would run "
        f"{len(ran)} points × {full // max(1, len(ran)):,} = "
        f"{full:,} ({spent / full:.0%}). Stopped after round {len(doc['rounds'])}: "
        f"{doc['stop_reason']}."
        + (f" {len(cannot)} infeasible point(s) cannot run: not simulated." if cannot else "")
    )
    if doc.get("run_dir"):
        console.print(f"results: {doc['run_dir']}")


@app.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@out_option
@click.option("--figures/--no-figures", default=True, show_default=True)
@json_option
def merge(run_dirs, out, figures, as_json) -> None:
    """Join runs of slices of one sweep (--points I:J) into one run: OUT/<name>/<run-id>/."""
    try:
        outcome = merge_runs(list(run_dirs), out, _drawn(figures))
    except MergeInterrupted as stop:  # a merged directory is not resumed: merged again
        print(
            f"interrupted ({stop.cause.signal_name}): the merge into {stop.run_dir} did not "
            "finish (its run.json says interrupted; delete the directory); run the merge "
            f"again: {trainsim_command()} merge "
            + " ".join(shlex.quote(str(d)) for d in [*run_dirs, "--out", out])
            + ("" if figures else " --no-figures"),
            file=sys.stderr,
        )
        _exit_stopped()
    if as_json:
        print(json.dumps(outcome.summary_doc, default=_json_default))
        return
    _print_run(outcome)


@app.command(name="fabric")
@scenario_argument
@set_option
@click.option(
    "--degrade",
    "degrade",
    multiple=True,
    metavar="LINK=FACTOR",
    help="Scale a link's capacity by a factor in (0, 1], e.g. --degrade leaf0-spine0=0.5 "
    "(repeatable; fail a cable with --fail-switch).",
)
@click.option(
    "--fail-switch",
    "fail_switch",
    multiple=True,
    metavar="NAME",
    help="Take a spine or core switch, or an inter-switch cable or bundle, out of routing, "
    "e.g. --fail-switch spine3, --fail-switch leaf0-spine0.0 (repeatable).",
)
@json_option
def fabric_command(scenario, overrides, degrade, fail_switch, as_json) -> None:
    """Fat-tree sizing, gradient all-reduce (analytic and SimPy), step breakdown, MFU, bottlenecks."""
    loaded = _load(scenario, overrides)
    factors = {}
    for item in degrade:
        name, _, value = item.partition("=")
        try:
            factors[name.strip()] = float(value)
        except ValueError:
            raise click.BadParameter(
                f"expected LINK=FACTOR, got {item!r}", param_hint="--degrade"
            ) from None
    # a sweep: the first point that can run (the loader refuses a sweep with none), named
    point = loaded.feasible[0]
    _warn_infeasible(loaded)
    if point.params:
        print(
            f"note: the fabric of sweep point {point.index} ({_params_text(point.params)}), "
            "the first that can run",
            file=sys.stderr,
        )
    try:
        report = perf.fabric_report(point.scenario, factors, set(fail_switch))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--degrade/--fail-switch") from None
    if as_json:
        doc = {
            "scenario": loaded.name,
            "point": point.index,
            "params": point.params,
            "fat_tree": {
                **dataclasses.asdict(report.tree),
                "switches": report.tree.switches,
                "bisection_GB_s": report.tree.bisection_GB_s,
            },
            "gradient_allreduce": {
                "bytes_per_rank": report.analytic.size_bytes,
                "algorithm": report.analytic.algorithm,
                "analytic_s": report.analytic.seconds,
                "analytic_busbw_GB_s": report.analytic.busbw_GB_s,
                "simulated_s": report.simulated.seconds,
                "simulated_busbw_GB_s": report.simulated.busbw_GB_s,
                "healthy_simulated_s": report.healthy_simulated.seconds,
                "routing": point.scenario.network.routing,
            },
            "step": {
                **dataclasses.asdict(report.breakdown),
                "what_if_step_s": report.step_s,
                "what_if_mfu": report.mfu,
            },
            "bottlenecks": [dataclasses.asdict(b) for b in report.simulated.bottlenecks],
        }
        print(json.dumps(doc))
        return
    console = _console()
    t, a, sim_, b = report.tree, report.analytic, report.simulated, report.breakdown
    where = f" (sweep point {point.index}: {_params_text(point.params)})" if point.params else ""
    table = Table(title=f"{loaded.name}{where}: fabric", show_header=False, title_justify="left")
    screen.text_column(table, "quantity")
    screen.text_column(table, "value", justify="right")
    rows = [
        (
            "fat tree",
            f"{t.tiers} tiers, radix {t.radix}, oversubscription {t.oversubscription:g}:1",
        ),
        ("switches (leaf / spine / core)", f"{t.leaves} / {t.spines} / {t.cores} = {t.switches}"),
        ("cables", f"{t.cables:,}"),
        ("bisection bandwidth", f"{t.bisection_GB_s / 1e3:,.1f} TB/s"),
        ("routing (network.routing)", report.routing),
        (
            "gradient all-reduce per rank",
            f"{a.size_bytes / 1e9:.2f} GB over {a.ranks} ranks ({a.algorithm})",
        ),
        ("  analytic", f"{a.seconds * 1e3:.1f} ms, busbw {a.busbw_GB_s:.1f} GB/s"),
        (
            "  SimPy fabric",
            f"{report.healthy_simulated.seconds * 1e3:.1f} ms, busbw {report.healthy_simulated.busbw_GB_s:.1f} GB/s",
        ),
        *(
            [
                (
                    "  SimPy fabric, what-if",
                    f"{sim_.seconds * 1e3:.1f} ms, busbw {sim_.busbw_GB_s:.1f} GB/s",
                )
            ]
            if sim_ is not report.healthy_simulated
            else []
        ),
        ("step: compute", f"{b.compute_s:.3f} s"),
        ("step: tensor-parallel comm", f"{b.tensor_parallel_s:.3f} s"),
        ("step: pipeline bubble", f"{b.bubble_s:.3f} s"),
        (
            "step: pipeline sends, context-parallel",
            f"{b.pipeline_send_s + b.context_parallel_s:.3f} s",
        ),
        (
            "step: exposed DP comm",
            f"{b.exposed_data_parallel_s:.3f} s (of {b.data_parallel_s:.3f} s)",
        ),
        (
            "step time",
            f"{b.step_s:.3f} s"
            + (f" → {report.step_s:.3f} s with what-ifs" if report.step_s != b.step_s else ""),
        ),
        (
            "MFU",
            f"{b.mfu:.3f}"
            + (f" → {report.mfu:.3f} with what-ifs" if report.step_s != b.step_s else ""),
        ),
    ]
    for label, value in rows:
        table.add_row(label, value)
    screen.show(console, table)
    links = Table(title="most loaded links (lowest fair share first)", title_justify="left")
    for column in ["link", "direction", "capacity GB/s", "flows", "share GB/s", "utilisation"]:
        links.add_column(column, justify="left" if column in ("link", "direction") else "right")
    for link in sim_.bottlenecks:
        links.add_row(
            link.name,
            link.direction,
            f"{link.capacity_GB_s:.1f}",
            str(link.flows),
            f"{link.share_GB_s:.1f}",
            f"{link.utilisation:.0%}",
        )
    screen.show(console, links)


@app.command(name="compare")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option(
    "--point-a",
    type=arguments.POINT,
    metavar="I",
    help="Compare only sweep point I of RUN_A (the `point` of its summary).",
)
@click.option("--point-b", type=arguments.POINT, metavar="J", help="The same for RUN_B.")
@click.option(
    "--figure",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Where to write the time-to-train figure [RUN_B/compare-with-<RUN_A id>.png].",
)
@click.option("--no-figure", is_flag=True, help="Write no figure.")
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Show every metric [the headline ones and those whose 95% CI excludes zero].",
)
@json_option
def compare_command(run_a, run_b, point_a, point_b, figure, no_figure, every, as_json) -> None:
    """Two runs side by side: the headline metrics and every one that clearly differs (--all:
    every metric), the means in A and B, B − A with a 95% CI, which is better. Paired by
    replica when both share seed and replica ids, else Welch's t.

    Sweep points are matched by their swept values (one run with one point: against each
    point of the other); --point-a/--point-b pick one point of each.
    """
    if no_figure and figure is not None:
        raise click.UsageError("give --figure PATH or --no-figure, not both")
    if figure is not None:
        arguments.check_figure_path(figure)
        for run_dir in (run_a, run_b):  # never over a run's own table, manifest or parts
            protect_run_files(
                run_dir, figure, "--figure",
                f"or leave --figure out for {run_b / compare.default_figure_name(run_a)}",
            )  # fmt: skip
    result = compare.compare_runs(run_a, run_b, point_a, point_b)
    written = None if no_figure else compare_figure.write_figure(result, figure)
    if as_json:
        print(json.dumps(compare.to_json(result, written), default=_json_default))
        return
    console = _console()
    if result.a.name != result.b.name:  # the first line says so
        console.print(arguments.different_scenarios(result.a.name, result.b.name))
    for item in compare.tables(result, every):
        if isinstance(item, Table):
            screen.show(console, item)
        else:
            console.print(item)
    if written is not None:
        console.print(f"figure: {written}")


@app.command(name="report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Where to write the HTML [RUN_DIR/report.html].",
)
def report_command(run_dir, out) -> None:
    """One self-contained HTML page of a run: the scenario in words, the calculator, the
    summaries, every figure, cost, downtime and failures, plan results, provenance."""
    # never over a run's own table, manifest, parts or figures, nor through a link
    protect_run_files(
        run_dir,
        run_dir / "report.html" if out is None else out,
        "--out",
        "" if out is None else f"or leave --out out for {run_dir / 'report.html'}",
    )
    print(f"report: {run_report.write_report(run_dir, out)}")


@app.command(name="init")
@click.argument("name")
@click.option(
    "--like",
    metavar="SCENARIO",
    help="Start from a shipped scenario's values (e.g. llama70b-1k) or a scenario file "
    "[the worked example of docs/scenarios.md: 7B on 128 H100s, NFS checkpoints].",
)
@click.option("--force", is_flag=True, help="Overwrite NAME.yaml if it exists.")
def init_command(name, like, force) -> None:
    """Write NAME.yaml in the current directory: a commented scenario with every required
    key and the common optional ones, each with its unit and source; it validates as written."""
    from sim.cli import scaffold

    path = scaffold.write(name, like, force)
    print(f"wrote {path}; check it with: trainsim validate {path}")


@app.command(name="export")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Where to write the CSV [RUN_DIR/replicas.csv]; never one of the run's own files.",
)
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
def export_command(run_dir, out, force) -> None:
    """The per-replica table of a run (replicas.parquet) as CSV: one row per sweep point
    and replica, the columns of docs/metrics.md."""
    from sim.runs import export

    print(f"csv: {export.export_csv(run_dir, out, force)}")


def _drawn(figures: bool):
    """The figure writer a run is finalised with: the standard set, or none (--no-figures)."""
    return write_run_figures if figures else None


def _finite(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _print_run(outcome: RunOutcome) -> None:
    console = _console()
    summary, doc = outcome.summary, outcome.summary_doc
    keys = outcome.scenario_set.varied_keys  # the sweep table's columns: its axes
    for point in doc["points"]:
        params = "  ".join(f"{k}={answer.value_text(v)}" for k, v in point["params"].items())
        if point.get("infeasible"):  # never simulated: no table, the reason
            console.print(
                f"{doc['scenario']}{'  ' + params if params else ''}  —  "
                f"[bold]infeasible[/bold]: {escape(point['infeasible'])} (not simulated)",
                highlight=False,
            )
            continue
        rows = summary[summary["point"] == point["point"]].set_index("metric")
        n = point.get("replicas", doc["replicas"])
        title = f"{doc['scenario']}{'  ' + params if params else ''}  —  {n} replicas, {point['finished']} finished"
        if point["errors"]:
            title += f", [red]{point['errors']} errors[/red]"
        table = Table(title=title, title_justify="left")
        screen.text_column(table, "metric")  # its words wrap: "checkpoint stall (hours)"
        for column in ["mean", "± s.e.", "p5", "p50", "p95", "p99"]:
            table.add_column(column, justify="right")
        for metric, label in SUMMARY_METRICS:
            if metric == "wall_hours":  # time to train in hours: shown once, in days
                continue
            s = rows.loc[metric]
            values = [float(s[k]) for k in ["mean", "sem", "p5", "p50", "p95", "p99"]]
            table.add_row(label, *answer.same_decimals(values, metric))
        if point["finished"] == 0:
            table.caption = _no_finish_reason(outcome, point["point"])
            table.caption_justify = "left"
        screen.show(console, table)
    if len(doc["points"]) > 1 and keys:
        _print_sweep(console, outcome, keys)
    if any("ci_half_width_days" in point for point in doc["points"]):
        _print_adaptive(console, doc)
    for line in answer.text_lines(_run_answer(outcome)):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    if outcome.run_dir is not None:
        console.print(f"results: {outcome.run_dir}")


def _best_rows(outcome: RunOutcome):
    """The replica table's columns the best points need (read alone from the run directory)."""
    if len(outcome.scenario_set.feasible) < 2:
        return None
    if outcome.run_dir is not None and (outcome.run_dir / "replicas.parquet").is_file():
        return answer.read_best_rows(outcome.run_dir / "replicas.parquet")
    return answer.best_rows(outcome.table)


def _run_answer(outcome: RunOutcome) -> answer.RunAnswer:
    return answer.run_answer(outcome.summary, outcome.scenario_set, _best_rows(outcome))


def _print_adaptive(console: Console, doc: dict) -> None:
    table = Table(
        title="adaptive replication: replicas used and the 95% half-width reached",
        title_justify="left",
    )
    for column in ["point", "replicas", "mean (days)", "half-width (days)", "relative"]:
        table.add_column(column, justify="right")
    screen.text_column(table, "params")
    points = [point for point in doc["points"] if not point.get("infeasible")]
    means = [point["metrics"]["time_to_train_days"]["mean"] for point in points]
    halves = [point.get("ci_half_width_days") for point in points]
    mean_texts = answer.same_decimals(means, distinct=True)
    half_texts = answer.same_decimals([math.nan if h is None else h for h in halves])
    for point, mean, half, mean_text, half_text in zip(
        points, means, halves, mean_texts, half_texts, strict=True
    ):
        relative = (
            f"{half / mean:.2%}" if mean and half is not None and math.isfinite(half) else "—"
        )
        table.add_row(
            str(point["point"]),
            f"{point['replicas']:,}",
            mean_text,
            half_text,
            relative,
            "  ".join(f"{k}={answer.value_text(v)}" for k, v in point["params"].items()),
        )
    screen.show(console, table)


def _no_finish_reason(outcome: RunOutcome, point: int) -> str:
    for problem in outcome.problems:
        if problem.point == point:
            return f"— no replica finished: {problem.message}"
    horizon = outcome.scenario_set.points[point].scenario.simulation.horizon_days
    return (
        f"— no replica finished within simulation.horizon_days={horizon:g}: "
        "time to train has no value; wall time and the buckets cover the horizon"
    )


def _print_sweep(console: Console, outcome: RunOutcome, keys: list[str]) -> None:
    summary = outcome.summary
    ttt = summary[summary["metric"] == "time_to_train_days"].set_index("point")
    lost = summary[summary["metric"] == "lost_work_hours"].set_index("point")
    cost = summary[summary["metric"] == "cost_usd"].set_index("point")
    goodput = summary[summary["metric"] == "goodput"].set_index("point")
    # best on time (mean wall time) and on cost (mean cost), as the answer below says
    marks: dict[int, list[str]] = {}
    rows = _best_rows(outcome)
    for best in answer.best_points(rows) if rows is not None else []:
        for p in [best.point, *best.tied]:
            marks.setdefault(p, []).append(best.criterion + (" (tied)" if best.tied else ""))
    table = Table(
        title="sweep: time to train by point (mean ± standard error, over finished replicas), "
        "cost and goodput (means)",
        title_justify="left",
    )
    for key in keys:  # interval_steps for checkpoint.interval_steps (unique endings)
        table.add_column(answer.short_keys(keys)[key], justify="right")
    for column in ["time to train (days)", "p95 (days)", "lost work (h)", "mean cost",
                   "goodput", "finished"]:  # fmt: skip
        table.add_column(column, justify="right")
    screen.text_column(table, "best on")
    fraction = summary[summary["metric"] == "finished_fraction"].set_index("point")["mean"]
    entries = outcome.summary_doc["points"]
    ran = [e["point"] for e in entries if not e.get("infeasible") and e["point"] in ttt.index]

    def column(frame, statistic: str, metric: str = "") -> dict[int, str]:
        """One column's numbers, alike in decimals, apart where points differ."""
        values = [float(frame.loc[p, statistic]) for p in ran]
        return dict(zip(ran, answer.same_decimals(values, metric, distinct=True)))

    # the standard errors with the means' decimals
    decimals = answer.decimals_for([float(ttt.loc[p, "mean"]) for p in ran], distinct=True)
    means = {p: answer.with_decimals(float(ttt.loc[p, "mean"]), decimals) for p in ran}
    sems = {p: answer.with_decimals(float(ttt.loc[p, "sem"]), decimals) for p in ran}
    p95, lost_h = column(ttt, "p95"), column(lost, "mean")
    costs = {p: "$" + text for p, text in column(cost, "mean").items()}
    goodputs = column(goodput, "mean", "goodput")
    cannot: list[str] = []  # the reasons points cannot run, below the table
    for entry in entries:
        point = entry["point"]
        if entry.get("infeasible"):  # a row of its own, its reason below the table
            table.add_row(
                *(answer.value_text(entry["params"].get(k)) for k in keys),
                "infeasible",
                *["—"] * 5,
                "",
            )
            where = answer.params_text(entry["params"], keys)
            cannot.append(f"infeasible, not simulated: {where}: {entry['infeasible']}")
            continue
        if point not in ttt.index:
            continue
        row = ttt.loc[point]
        mean = (
            f"{means[point]} ± {sems[point]}" if math.isfinite(row["mean"]) else "— (none finished)"
        )
        table.add_row(
            *(answer.value_text(row[k]) for k in keys),
            mean,
            p95[point],
            lost_h[point],
            costs[point],
            goodputs[point],
            f"{fraction.loc[point]:.0%}",
            ", ".join(marks.get(int(point), [])),
        )
    screen.show(console, table)
    for line in cannot:
        console.print(line, highlight=False, markup=False)
    if outcome.problems:
        console.print(
            f"{len(outcome.problems)} of {len(ttt)} points cannot finish within "
            "simulation.horizon_days: " + "; ".join(f"{p.params}" for p in outcome.problems)
        )


def _console() -> Console:
    """Tables on stdout, as wide as the terminal or COLUMNS (sim/show/console.py)."""
    return screen.stdout_console()


def _load(path: Path, overrides=(), params=()) -> ScenarioSet:
    """Every command reads its scenario file here: --set and --param (or --vary) applied, the
    sweep expanded, validated. What the loader did beyond the keys given (its notes, e.g. a
    storage tier whose changed kind starts from the new preset) is said on stderr."""
    loaded = load_scenario(path, list(overrides), list(params))
    for note in loaded.notes:
        print(f"note: {note}", file=sys.stderr)
    return loaded


def _params_text(params: dict) -> str:
    return ", ".join(f"{k}={answer.value_text(v)}" for k, v in params.items())


def _warn_infeasible(loaded: ScenarioSet) -> None:
    """Sweep points that cannot run (they will be rows marked infeasible): on stderr."""
    for point in loaded.points:
        if point.infeasible is not None:
            print(f"warning: sweep point {point.params}: infeasible: {point.infeasible}",
                  file=sys.stderr)  # fmt: skip


def _warn(problems: list[feasibility.Problem]) -> None:
    """Points no replica of which can finish: said on stderr before anything is simulated."""
    for problem in problems:
        print(f"warning: {problem.where()}{problem.message}", file=sys.stderr)


def _fmt_metric(metric: str, value: float, unit: bool = True) -> str:
    """A metric's value with its unit: $29,460 for costs, 12.3 h for hours, 16.2 days
    (the number as compare.fmt_metric writes it, from sim/decide/answer.py's helpers)."""
    text = compare.fmt_metric(metric, value)
    suffix = unit_of(metric)
    return f"{text} {suffix}" if unit and suffix and suffix != "USD" and text != "—" else text


def _json_default(value):
    return value.item() if hasattr(value, "item") else str(value)


def _fmt(value: float) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    text = answer.figure(abs(value))
    return "-" + text if value < 0 and text != "0" else text


# the commands that start from the user's own data (sim/cli/data_commands.py)
app.add_command(fit_command)
app.add_command(forecast_command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: maps bad input to exit 2 and internal errors to exit 1, never a traceback.
    `argv` (default: the command line) lets tests run a command in-process."""
    try:
        code = app.main(args=argv, standalone_mode=False, prog_name="trainsim")
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except click.ClickException as exc:
        exc.show(file=sys.stderr)
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        print("aborted", file=sys.stderr)
        _exit_stopped()
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("TRAINSIM_DEBUG"):
            traceback.print_exc()
        print(
            f"internal error: {type(exc).__name__}: {exc} "
            "(a bug in trainsim; set TRAINSIM_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
