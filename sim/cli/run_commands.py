"""`trainsim run` (also `--resume`, of a run, an optimize or a plan), `merge` and `export`:
the library calls of `sim.runs.api` with the standard figures, and the run's answer as
tables (per point, the sweep, adaptive replication).
"""

from __future__ import annotations

import json
import math
import shlex
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sim.cli import arguments
from sim.cli.common import (
    executor_option,
    exit_stopped,
    figure_writer,
    json_option,
    load,
    out_option,
    plain_json,
    refuse_with_resume,
    say_interrupted,
    scheduler_option,
    set_option,
    table_console,
    warn,
)
from sim.cli.optimize_command import optimize_answer, optimize_question
from sim.cli.plan_command import plan_answer
from sim.decide import answer, planner
from sim.model import feasibility
from sim.model.columns import SUMMARY_METRICS
from sim.runs.api import (
    MergeInterrupted,
    RunInterrupted,
    RunOutcome,
    merge_runs,
    resume_run,
    run_scenario,
)
from sim.runs.manifest import trainsim_command
from sim.show import console as screen
from sim.show import plan_plots


@click.command()
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
    help="Add replicas per point until the 95% half-width of mean time to train is at most "
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
        refuse_with_resume(
            points_slice=points_slice, target_ci=target_ci, timeline=timeline, incidents=incidents
        )
        arguments.check_workers(workers, executor)
    if resume is not None and planner.is_plan_run(resume):  # a plan's run: its race resumes
        plan_answer(lambda: planner.resume_plan(resume, workers, executor, progress, scheduler,
                                                 plan_plots.pareto_figure), as_json)  # fmt: skip
        return
    question = optimize_question(resume) if resume is not None else None
    try:
        if resume is not None:
            outcome = resume_run(
                resume, workers, executor, progress, figure_writer(figures), scheduler
            )
        else:
            loaded = load(scenario, overrides, params)
            arguments.check_workers(workers, executor, loaded.base.simulation.executor)
            total = feasibility.check_replicas(loaded, replicas, points_slice)
            # said before the run: these points run, and may or may not fit
            near_limit = feasibility.memory_warnings(loaded)
            warn([w for w in near_limit if points_slice is None or w.point in points_slice])
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
                figures=figure_writer(figures),
                timeline=timeline,
                scheduler=scheduler,
                points=points_slice,
                target_ci=target_ci,
                incidents=incidents,
            )
    except RunInterrupted as stop:
        say_interrupted(stop)
    if question is not None:  # the run of `trainsim optimize`: its answer
        optimize_answer(outcome, question, as_json)
        return
    warn(outcome.problems)
    if as_json:
        print(json.dumps(outcome.summary_doc, default=plain_json))
        return
    print_run(outcome)


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@out_option
@click.option("--figures/--no-figures", default=True, show_default=True)
@json_option
def merge(run_dirs, out, figures, as_json) -> None:
    """Join runs of slices of one sweep (--points I:J) into one run: OUT/<name>/<run-id>/."""
    try:
        outcome = merge_runs(list(run_dirs), out, figure_writer(figures))
    except MergeInterrupted as stop:  # a merged directory is not resumed: merged again
        print(
            f"interrupted ({stop.cause.signal_name}): the merge into {stop.run_dir} did not "
            "finish (its run.json says interrupted; delete the directory); run the merge "
            f"again: {trainsim_command()} merge "
            + " ".join(shlex.quote(str(d)) for d in [*run_dirs, "--out", out])
            + ("" if figures else " --no-figures"),
            file=sys.stderr,
        )
        exit_stopped()
    if as_json:
        print(json.dumps(outcome.summary_doc, default=plain_json))
        return
    print_run(outcome)


@click.command(name="export")
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


def print_run(outcome: RunOutcome) -> None:
    console = table_console()
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
        title = (
            f"{doc['scenario']}{'  ' + params if params else ''}  —  {n:,} replicas, "
            f"{point['finished']:,} finished"
        )
        if point["errors"]:
            title += f", [red]{point['errors']:,} errors[/red]"
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
            table.caption = no_finish_reason(outcome, point["point"])
            table.caption_justify = "left"
        screen.show(console, table)
    if len(doc["points"]) > 1 and keys:
        print_sweep(console, outcome, keys)
    if any("ci_half_width_days" in point for point in doc["points"]):
        print_adaptive(console, doc)
    for line in answer.text_lines(run_answer(outcome)):
        screen.say(console, line)
    if outcome.run_dir is not None:
        screen.say(console, f"results: {outcome.run_dir}")


def best_rows(outcome: RunOutcome):
    """The replica table's columns the best points need (read alone from the run directory)."""
    if len(outcome.scenario_set.feasible) < 2:
        return None
    if outcome.run_dir is not None and (outcome.run_dir / "replicas.parquet").is_file():
        return answer.read_best_rows(outcome.run_dir / "replicas.parquet")
    return answer.best_rows(outcome.table)


def run_answer(outcome: RunOutcome) -> answer.RunAnswer:
    return answer.run_answer(outcome.summary, outcome.scenario_set, best_rows(outcome))


def print_adaptive(console: Console, doc: dict) -> None:
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


def no_finish_reason(outcome: RunOutcome, point: int) -> str:
    for problem in outcome.problems:
        if problem.point == point:
            return f"— no replica finished: {problem.message}"
    simulation = outcome.scenario_set.points[point].scenario.simulation
    horizon = simulation.horizon_days
    if simulation.until == "horizon":
        return (
            f"— a fleet run to its horizon ({horizon:g} days, simulation.until: horizon): time "
            "to train has no value; wall time and the buckets cover the horizon"
        )
    return (
        f"— no replica finished within simulation.horizon_days={horizon:g}: "
        "time to train has no value; wall time and the buckets cover the horizon"
    )


def print_sweep(console: Console, outcome: RunOutcome, keys: list[str]) -> None:
    summary = outcome.summary
    ttt = summary[summary["metric"] == "time_to_train_days"].set_index("point")
    lost = summary[summary["metric"] == "lost_work_hours"].set_index("point")
    cost = summary[summary["metric"] == "cost_usd"].set_index("point")
    goodput = summary[summary["metric"] == "goodput"].set_index("point")
    # best on time (mean wall time) and on cost (mean cost), as the answer below says
    marks: dict[int, list[str]] = {}
    rows = best_rows(outcome)
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
        screen.say(console, line)
    if outcome.problems:
        screen.say(
            console,
            f"{len(outcome.problems)} of {len(ttt)} points cannot finish within "
            "simulation.horizon_days: " + "; ".join(f"{p.params}" for p in outcome.problems),
        )
