"""`trainsim plan`: the race for the configuration that meets a deadline at the lowest mean
objective (`sim.decide.planner`), its Pareto figure, and its answer as tables.
"""

from __future__ import annotations

import json
import shlex
import sys

import click
from rich import box
from rich.table import Table

from sim.cli import arguments
from sim.cli.common import (
    executor_option,
    exit_stopped,
    json_option,
    load,
    out_option,
    say_interrupted,
    scenario_argument,
    scheduler_option,
    set_option,
    table_console,
    warn,
)
from sim.decide import answer, planner, racing
from sim.model import feasibility
from sim.model.columns import unit_of
from sim.runs import summaries
from sim.runs.api import RunInterrupted
from sim.runs.manifest import trainsim_command
from sim.show import console as screen
from sim.show import plan_plots


@click.command(name="plan")
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
    default=racing.FIRST_REPLICAS,
    show_default=True,
    help="Replicas every point gets in the first round (each round doubles them).",
)
@click.option(
    "--replicas-max",
    type=arguments.REPLICAS_2,
    default=racing.MAX_REPLICAS,
    show_default=True,
    help="Replicas a point gets at most.",
)
@click.option(
    "--precision",
    type=arguments.POSITIVE,
    default=racing.PRECISION,
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
    loaded = load(scenario, overrides, planner.parse_vary(str(scenario), vary))
    arguments.check_workers(workers, executor, loaded.base.simulation.executor)
    warn(feasibility.memory_warnings(loaded))  # before the race: they run, and may not fit
    plan_answer(
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


def plan_answer(race, as_json: bool) -> None:
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
            exit_stopped()
        say_interrupted(
            stop, " (it reuses them and gives the plan of an uninterrupted run)", counted=False
        )
    warn(result.problems)
    if as_json:
        print(json.dumps(result.doc))
        return
    print_plan(result.doc)


def print_plan(doc: dict) -> None:
    """The plan as tables, the answer last (as `run` ends with its answer): what was searched,
    every point best first, the time-cost front, the replicas spent, then the chosen point
    (or the closest, why none makes it and what would) and the run directory."""
    console = table_console()
    keys, objective, q = doc["varied_keys"], doc["objective"], doc["quantile"]
    deadline = f"{doc['deadline_days']:g} days"
    goal = "highest" if doc["direction"] == "max" else "lowest"
    screen.say(
        console,
        f"{doc['scenario']}: the {goal} {answer.objective_words(objective)} with "
        f"P(time to train ≤ {deadline}) ≥ "
        f"{answer.share(q)}, over {len(doc['candidates'])} points of {' × '.join(keys)}",
    )

    def params(row: dict) -> str:
        return "  ".join(f"{k}={answer.value_text(row[k])}" for k in keys)

    def share(row: dict) -> str:
        if row["p_meet"] is None:  # never ran: its configuration cannot
            return "—"
        return (
            f"{answer.share(row['p_meet'])} [{answer.share(row['p_meet_low'])}, "
            f"{answer.share(row['p_meet_high'])}]"
        )

    def plus_minus(value, low, high) -> str:
        """value ± the half-width of its (symmetric) 95% interval, the value with the digits
        that tell the interval's ends apart."""
        if value is None:
            return "—"
        if low is None or high is None:
            return answer.readable(objective, value)
        digits = answer.interval_decimals(
            objective, low, high, answer.common_unit(objective, [value])
        )
        text = answer.readable(objective, value, decimals=digits)
        return f"{text} ± {answer.readable(objective, (high - low) / 2)}"

    def mean_ci(row: dict) -> str:
        return plus_minus(row["objective_mean"], row["objective_ci_low"], row["objective_ci_high"])

    quantile_name = f"p{q * 100:g}"
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
        for reason, rows in reasons.items():
            shared = {k: rows[0][k] for k in keys if all(r[k] == rows[0][k] for r in rows)}
            where = "  ".join(f"{k}={answer.value_text(v)}" for k, v in shared.items())
            count = f"{len(rows)} points" if len(rows) > 1 else "1 point"
            below.append(
                f"infeasible, cannot run, not simulated ({count}"
                f"{': ' + where if where else ''}): {reason}"
            )
    ran = [row for row in doc["candidates"] if row["replicas"]]
    legend = answer.status_legend([row["status"] for row in doc["candidates"]], doc)
    if legend:
        below.append(f"where {legend}")
    # the quantile's days alike in decimals in both tables, apart where points differ
    day_decimals = answer.decimals_for(
        [row["time_to_train_days_at_quantile"] for row in ran], distinct=True
    )

    def days(value) -> str:
        return answer.with_decimals(value, day_decimals)

    for row in ran:
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
        screen.say(console, line)
    front = Table(
        title=f"time-cost Pareto front ({quantile_name} time to train vs mean cost)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for key in keys:
        front.add_column(key.split(".")[-1].replace("_", "\n"), justify="right")
    for column in [f"{quantile_name} days", "mean cost", "P(meet)"]:
        front.add_column(column, justify="right")
    screen.text_column(front, "status: against the chosen point" if doc["chosen"] else "status")
    for row in doc["pareto"]:
        front.add_row(
            *(answer.value_text(row[k]) for k in keys),
            days(row["time_to_train_days_at_quantile"]),
            answer.money(row["cost_usd_mean"]),
            answer.share(row["p_meet"]),
            # its status, and how it compares: a `dominated` point costs more than the
            # chosen one, and a faster, costlier point is rightly on the time-cost front
            answer.front_role(row, doc),
        )
    screen.show(console, front)
    spent, full = doc["replicas_spent"], doc["replicas_full_grid"]
    screen.say(
        console,
        f"replicas: the search ran {spent:,}; a full grid at the same precision would run "
        f"{len(ran)} points × {full // max(1, len(ran)):,} = "
        f"{full:,} ({spent / full:.0%}). Stopped after round {len(doc['rounds'])}: "
        f"{doc['stop_reason']}."
        + (f" {len(cannot)} infeasible point(s) cannot run: not simulated." if cannot else ""),
    )
    chosen = doc["chosen"]
    if chosen is not None:
        table = Table(
            title=f"answer: {params(chosen)} (chosen)", show_header=False, title_justify="left"
        )
        screen.text_column(table, "quantity")
        screen.text_column(table, "value")
        table.add_row(
            f"{answer.objective_words(objective)} ± 95% CI",
            f"{mean_ci(chosen)} ("
            + answer.readable_interval(
                objective, chosen["objective_ci_low"], chosen["objective_ci_high"], signed=False
            )
            + ")",
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
            screen.say(
                console,
                f"note: its P(meet) is {answer.share(chosen['p_meet'])} ≥ {answer.share(q)}, "
                f"but the 95% interval reaches down to {answer.share(chosen['p_meet_low'])}: "
                "more replicas (--replicas-max) would confirm it",
            )
    else:
        best = answer.plan_closest(doc)
        text = (
            "answer: no configuration meets the deadline: no point finishes "
            f"within {deadline} in at least {answer.share(q)} of replicas."
        )
        if best is not None:
            text += (
                f" The closest, {params(best)}, has a {quantile_name} time to train of "
                f"{days(best['time_to_train_days_at_quantile'])} days and makes it in "
                f"{answer.share(best['p_meet'])} of {best['replicas']:,} replicas (95% CI "
                f"{answer.share(best['p_meet_low'])}–{answer.share(best['p_meet_high'])})."
            )
        why = answer.plan_miss_reason(doc, days)
        screen.say(console, f"{text} {why}" if why else text)
    if doc.get("run_dir"):
        screen.say(console, f"results: {doc['run_dir']}")  # a path is never wrapped mid-name
