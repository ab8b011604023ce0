"""`trainsim optimize`: a sweep of one key run, and its best value with a confidence interval
and the paired difference to each other value (`sim.decide.analysis.optimize`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click
from rich.table import Table

from sim.cli import arguments
from sim.cli.common import (
    finite_or_none,
    json_option,
    load,
    out_option,
    plain_json,
    say_interrupted,
    scenario_argument,
    set_option,
    table_console,
    warn,
)
from sim.decide import analysis, answer
from sim.model import feasibility
from sim.model.scenario_set import ScenarioError
from sim.runs import summaries
from sim.runs.api import RunInterrupted, RunOutcome, run_scenario
from sim.runs.manifest import read_manifest
from sim.show import console as screen
from sim.show.run_figures import write_run_figures


@click.command()
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
    is_flag=True,
    help="Higher is better for --metric (the default for goodput, effective_mfu).",
)
@click.option(
    "--minimize",
    is_flag=True,
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
    maximize,
    minimize,
    statistic,
    out,
    as_json,
    progress,
) -> None:
    """Sweep one key and report the value with the best mean (or percentile) of a metric."""
    if len(params) != 1:
        raise click.BadParameter("optimize one key at a time", param_hint="--param")
    if maximize and minimize:  # the last one given would silently win
        raise click.UsageError("give --maximize or --minimize, not both")
    direction = "max" if maximize else "min" if minimize else None
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
    loaded = load(scenario, overrides, params)
    arguments.check_workers(workers, None, loaded.base.simulation.executor)
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
            figures=write_run_figures,
            note={"optimize": question},  # a resume of the run answers it
        )
    except RunInterrupted as stop:
        say_interrupted(stop, " (it runs only the missing replicas and prints this answer)")
    optimize_answer(outcome, question, as_json)


def optimize_question(run_dir: Path) -> dict | None:
    """The question `trainsim optimize` asked of the run in `run_dir` (key, metric,
    statistic, direction), or None: not an optimize run, or not a readable run directory."""
    try:
        question = read_manifest(Path(run_dir), "a run directory").get("optimize")
    except ScenarioError:
        return None
    return question if isinstance(question, dict) else None


def optimize_answer(outcome: RunOutcome, question: dict, as_json: bool) -> None:
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
    warn(outcome.problems)
    try:
        best = analysis.optimize(outcome.table, key, metric, statistic, direction, infeasible)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--param/--statistic") from None
    if as_json:
        doc = {k: v for k, v in dataclasses.asdict(best).items() if k != "points"}
        records = best.points.to_dict(orient="records")
        doc["points"] = [{k: finite_or_none(v) for k, v in row.items()} for row in records]
        doc["run_dir"] = str(outcome.run_dir)
        print(json.dumps(doc, default=plain_json))
        return
    console = table_console()
    goal = "highest" if best.direction == "max" else "lowest"
    words = f"{statistic} {answer.metric_words(metric)}"  # mean cost, p95 time to train
    points = best.points.to_dict(orient="records")
    # one unit for the values and their CIs, and one for the differences and theirs, as
    # each column reads best
    feasible = [row for row in points if row["verdict"] != "infeasible"]
    unit = answer.common_unit(
        metric, [row[k] for row in feasible for k in (statistic, "ci_low", "ci_high")]
    )
    difference_unit = answer.common_unit(
        metric,
        [
            row[k]
            for row in feasible
            for k in ("difference", "difference_ci_low", "difference_ci_high")
        ],
    )

    # and the decimals that tell each interval's ends apart, alike down the column
    decimals = max(
        (answer.interval_decimals(metric, r["ci_low"], r["ci_high"], unit) or 0 for r in feasible),
        default=0,
    )
    difference_decimals = max(
        (
            answer.interval_decimals(
                metric, r["difference_ci_low"], r["difference_ci_high"], difference_unit
            )
            or 0
            for r in feasible
        ),
        default=0,
    )
    if answer.interval_decimals(metric, 0.0, 0.0, unit) is None:  # not a duration or a cost
        decimals = difference_decimals = None

    def value(number: float) -> str:
        return answer.readable(metric, number, unit=unit, decimals=decimals)

    def interval(low: float, high: float) -> str:
        return answer.readable_interval(metric, low, high, False, unit, decimals)

    def worse_by(number: float, low: float, high: float) -> str:
        text = answer.readable(metric, number, unit=difference_unit, decimals=difference_decimals)
        ci = answer.readable_interval(
            metric, low, high, False, difference_unit, difference_decimals
        )
        return f"{text} ({ci})"

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
            interval(row["ci_low"], row["ci_high"]),
            ""
            if tied
            else worse_by(row["difference"], row["difference_ci_low"], row["difference_ci_high"]),
            row["verdict"],
        )
    screen.show(console, table)
    for line in infeasible_lines:
        screen.say(console, line)
    if best.best is None:
        values = ", ".join(answer.value_text(v) for v in best.tied)
        screen.say(
            console,
            f"no single best {key}: {values} tie at {words} {value(best.best_value)}"
            + (
                f"; the next, {answer.value_text(best.runner_up)}, is worse by "
                f"{answer.readable(metric, best.difference)}"
                if best.runner_up is not None
                else ""
            ),
        )
    else:
        low, high = best.difference_ci
        sure = (
            "distinguishable"
            if low > 0
            else "not distinguishable at 95% (more replicas would tell)"
        )
        screen.say(
            console,
            f"best {key} = {answer.value_text(best.best)}: {words} {value(best.best_value)} "
            f"(95% CI {interval(*best.best_ci)}); runner-up "
            f"{answer.value_text(best.runner_up)} is worse by "
            + answer.readable_estimate(metric, best.difference, low, high, ci="paired 95% CI")[:-1]
            + f": {sure})",
        )
    screen.say(console, f"results: {outcome.run_dir}")
