"""The commands that start from the user's own data: `trainsim fit` (failure classes from an
incident log) and `trainsim forecast` (a run in flight). `sim/cli/commands.py` registers them; the
statistics are in `sim/data/fit.py` and `sim/data/forecast.py`.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
from pathlib import Path

import click
import yaml
from rich.table import Table

from sim.cli.arguments import (
    COUNT,
    DAYS_OR_ZERO,
    GPU_DAYS,
    GPUS_PER_NODE,
    INDEX,
    REPLICAS,
    RESULTS_ENV,
    SEED,
    STEPS,
    WORKERS,
    console,
)
from sim.decide import answer
from sim.model.scenario_set import ScenarioError
from sim.runs.files import finite, json_default
from sim.show.console import say, show, text_column


def _number(value: float) -> str:
    """A number of the fit's and the forecast's tables: answer.number (3 significant digits,
    < 0.001 for a tiny one), blank when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return answer.number(value)


@click.command(name="fit")
@click.argument("incidents", type=click.Path(path_type=Path))
@click.option(
    "--nodes",
    type=COUNT,
    help="Nodes the log covers, each for the whole window [a trainsim run's cluster.nodes].",
)
@click.option("--gpus-per-node", type=GPUS_PER_NODE, help="GPUs per node [8, or the run's].")
@click.option(
    "--start",
    metavar="T0",
    help="Window start: hours (0 by default) or ISO 8601 (needed for a log in dates).",
)
@click.option(
    "--end",
    metavar="T1",
    help="Window end: hours or ISO 8601 [a trainsim replica's wall time, else the last failure].",
)
@click.option("--replica", type=INDEX, help="A trainsim log: the replica to fit.")
@click.option("--point", type=INDEX, help="A trainsim log: the sweep point.")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help=f"Where fitted.yaml, failures.yaml, fit.json and figures/ go [${RESULTS_ENV}/fit, "
    "else results/fit].",
)
@click.option(
    "--fleet-age-days",
    type=DAYS_OR_ZERO,
    help="The fleet's age at the window's start (0: the log starts with the fleet) [fitted "
    "with the trend; a trainsim run's cluster.aging.age_days].",
)
@click.option(
    "--check",
    is_flag=True,
    help="Run the log's fleet back (fleet.yaml) and print the log beside the model, a verdict "
    "per measure; figures/check.png.",
)
@click.option(
    "--check-replicas", type=REPLICAS, default=20, show_default=True,
    help="Replicas of the fleet the check runs.",
)  # fmt: skip
@click.option("--workers", type=WORKERS, help="Processes for the check's replicas [all cores].")
@click.option(
    "--like",
    type=click.Path(path_type=Path),
    help="A scenario to write again as scenario.yaml under --out, with the fitted failures, "
    "spread and trend in place.",
)
@click.option("--seed", type=SEED, default=0, help="Bootstrap seed (and the check's).")
@click.option("--figures/--no-figures", default=True, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout and nothing else.")
def fit(
    incidents, nodes, gpus_per_node, start, end, replica, point, out, fleet_age_days, check,
    check_replicas, workers, like, seed, figures, as_json,
):  # fmt: skip
    """Fit failure classes from an incident log (CSV or parquet: time, node[, class,
    repair_hours, scope]): rates with exact 95% intervals, exponential vs Weibull, lemons or
    a spread between nodes, repairs that do not hold, the fleet's trend with its age, repair
    times; writes a failures: fragment a scenario takes and the log's fleet as a scenario
    (docs/fitting.md)."""
    from sim.data import fit as fitting
    from sim.data import logs
    from sim.runs.files import protect_run_files, write_regular
    from sim.runs.manifest import trainsim_command

    if out is None:
        out = Path(os.environ.get(RESULTS_ENV) or "results").expanduser() / "fit"
    out = out.expanduser()
    # never into a run directory (its files or figures), never through a link
    for path in (out, out / "figures"):
        protect_run_files(None, path, "--out")
    from sim.data import fleet_check

    log = logs.read_log(incidents, nodes, gpus_per_node, start, end, replica, point, fleet_age_days)
    result = fitting.fit_log(log, seed)
    doc = result.doc()
    fleet = fleet_check.fleet_doc(result, log, check_replicas, seed)
    scenario_text = None
    if like is not None:
        scenario_text = fleet_check.like_yaml(like, result, log)
    checked = None
    if check and result.classes:
        checked = fleet_check.check(
            result, log, check_replicas, seed, workers, progress=not as_json
        )
        doc["check"] = checked.doc()
    doc = finite(doc)
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_regular(out / "fitted.yaml", fitting.fragment_yaml(result))
        write_regular(
            out / "failures.yaml", yaml.safe_dump(result.fragment()["failures"], sort_keys=False)
        )
        write_regular(out / "fleet.yaml", fleet_check.fleet_yaml(fleet, result))
        if scenario_text is not None:
            write_regular(out / "scenario.yaml", scenario_text)
        write_regular(out / "fit.json", json.dumps(doc, indent=2, default=json_default) + "\n")
        if figures and result.classes:
            from sim.show.fit_plots import write_check_figure, write_fit_figures

            write_fit_figures(result, out / "figures", write_regular)
            if checked is not None:
                write_check_figure(checked, out / "figures", write_regular)
    except OSError as exc:
        where = exc.filename if exc.filename else out
        raise ScenarioError(
            str(out), "--out", f"cannot write the fit there ({exc.strerror or exc} at {where}); "
            "give --out a directory that can be created and written",
        ) from None  # fmt: skip
    if as_json:
        print(json.dumps(doc, default=json_default))
        return
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    screen = console()
    table = Table(
        title=f"{incidents}: {log.nodes} nodes x {log.gpus_per_node} GPUs, "
        f"{log.window_hours:,.1f} h ({log.gpu_days:,.0f} GPU-days)",
        title_justify="left",
    )
    table.add_column("class")
    text_column(table, "parameter")  # the words wrap; the numbers are never cut short
    for column in ("value", "95% low", "95% high", "events"):
        table.add_column(column, justify="right")
    for what, name, value, low, high, events in fitting.table_rows(result):
        count = f"{events:,}" if isinstance(events, int) else str(events)
        table.add_row(what, name, _number(value), _number(low), _number(high), count)
    show(screen, table)
    if result.lemons is not None and not result.lemons.overdispersed:
        screen.print(
            f"lemons: per-node counts are not overdispersed (p = {result.lemons.p_value:.3g}"
            " >= 0.05): no spread between nodes written"
        )
    if checked is not None:
        show(screen, _check_table(checked))
        say(
            screen,
            f"check: {checked.passed} of {len(checked.judged)} measures within their tolerance "
            f"(the model: the mean of {checked.replicas:,} replicas of fleet.yaml)",
        )
    say(screen, f"fragment: {out / 'fitted.yaml'}")
    screen.print(
        f"the log's fleet: {trainsim_command()} run {shlex.quote(str(out / 'fleet.yaml'))} "
        "--incidents",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if scenario_text is not None:
        screen.print(
            f"use it: {trainsim_command()} run {shlex.quote(str(out / 'scenario.yaml'))}",
            markup=False,
            highlight=False,
            soft_wrap=True,  # one line, to copy as it is
        )
        return
    failures = shlex.quote(str(out / "failures.yaml"))
    spread = " ".join(
        f"--set cluster.{key}={str(value).lower() if isinstance(value, bool) else value}"
        for key, value in _flat(result.fragment().get("cluster", {}))
    )
    screen.print(
        f'use it: {trainsim_command()} run SCENARIO --set "failures=$(cat {failures})"'
        + (f" {spread}" if spread else ""),
        markup=False,
        highlight=False,
        soft_wrap=True,  # one line, to copy as it is
    )
    screen.print(
        "or fit again with --like SCENARIO: scenario.yaml, that scenario with all of it in place",
        markup=False,
        highlight=False,
    )


def _flat(doc: dict, prefix: str = "") -> list[tuple[str, object]]:
    """A nested mapping's leaves as (dotted key, value), for --set."""
    out: list[tuple[str, object]] = []
    for key, value in doc.items():
        if isinstance(value, dict):
            out.extend(_flat(value, f"{prefix}{key}."))
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _check_table(checked) -> Table:
    """The log beside the model, a row per measure."""
    table = Table(title="the log against its fleet run back", title_justify="left")
    text_column(table, "measure")
    for column in ("log", "model", "model 5-95%", "tolerance"):
        table.add_column(column, justify="right")
    table.add_column("verdict")
    for m in checked.measures:
        low, high = m.range
        if m.share:
            values = (f"{m.log:.1%}", f"{m.mean:.1%}", f"{low:.1%}-{high:.1%}")
        else:
            values = (f"{m.log:,.0f}", f"{m.mean:,.0f}", f"{low:,.0f}-{high:,.0f}")
        holds = m.holds()
        verdict = "-" if holds is None else ("within" if holds else "OFF")
        table.add_row(m.label, *values, m.tolerance if holds is not None else "-", verdict)
    return table


@click.command(name="forecast")
@click.argument("scenario", type=click.Path(path_type=Path))
@click.option(
    "--elapsed-days",
    type=DAYS_OR_ZERO,
    required=True,
    help="Days the run has been going.",
)
@click.option(
    "--done-steps",
    type=STEPS,
    required=True,
    help="Steps done: the newest durable checkpoint (the rest starts from it).",
)
@click.option(
    "--incidents",
    type=click.Path(path_type=Path),
    metavar="LOG",
    help="The run's own incident log (the format trainsim fit reads; times since the run's "
    "start, or ISO 8601 with --start): each class's rate updated from it.",
)
@click.option("--start", metavar="T0", help="The run's start (ISO 8601), for a log in dates.")
@click.option("--deadline-days", type=DAYS_OR_ZERO, help="P(the whole run done by then).")
@click.option(
    "--prior-gpu-days",
    type=GPU_DAYS,
    help="What the scenario's rates weigh against the log, in GPU-days of exposure "
    "[the job's GPUs x 7 days].",
)
@click.option("--replicas", type=REPLICAS, help="[scenario's simulation.replicas]")
@click.option("--seed", type=SEED, help="[scenario's seed]")
@click.option("--workers", type=WORKERS, default=1, show_default=True)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a scenario key (repeatable), as for trainsim run.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout and nothing else.")
def forecast(
    scenario,
    elapsed_days,
    done_steps,
    incidents,
    start,
    deadline_days,
    prior_gpu_days,
    replicas,
    seed,
    workers,
    overrides,
    as_json,
):
    """Forecast a run in flight from its newest durable checkpoint: days to go, total days,
    P(done by the deadline), cost to go; with --incidents, rates updated from the run's own
    failures (gamma prior, conjugate posterior) and printed beside the scenario's."""
    from sim.data import forecast as forecasting

    result = forecasting.forecast(
        scenario,
        elapsed_days,
        done_steps,
        incidents,
        deadline_days,
        replicas,
        seed,
        overrides,
        prior_gpu_days,
        start,
        workers,
    )
    doc = finite(result.doc())
    if as_json:
        print(json.dumps(doc, default=json_default))
        return
    for problem in result.problems:  # as `trainsim run` warns, before its tables
        print(f"warning: {problem.where()}{problem.message}", file=sys.stderr)
    screen = console()
    remaining = result.total_steps - result.done_steps
    say(
        screen,
        f"{result.scenario}: {result.done_steps:,} of {result.total_steps:,} steps done after "
        f"{result.elapsed_days:g} days; {remaining:,} to go; {result.replicas:,} replicas, "
        f"seed {result.seed}",
    )
    if result.has_log:
        # counts and rates side by side, each column saying which it is
        rates = Table(
            title=f"failures by class: counts in the {result.elapsed_days:g} days so far, and "
            f"rates per 1k GPU-days (the gamma prior worth {result.prior_gpu_days:,.0f} "
            "GPU-days)",
            title_justify="left",
        )
        for column in (
            "class",
            "scenario rate",
            "seen (count)",
            "expected (count)",
            "posterior mean rate",
            "95% low",
            "95% high",
        ):
            rates.add_column(column, justify="left" if column == "class" else "right")
        expected = forecasting.expected_failures(result.classes)
        for c in result.classes:
            low, high = c.posterior.interval()
            rates.add_row(
                c.name,
                _number(c.scenario_rate),
                f"{c.events:,}",
                _number(expected[c.name]),
                _number(c.posterior.mean),
                _number(low),
                _number(high),
            )
        show(screen, rates)
    table = Table(title="forecast", title_justify="left")
    table.add_column("quantity")
    if result.has_log:
        table.add_column("with the run's log", justify="right")
    table.add_column("scenario alone", justify="right")
    summaries = [result.forecast.summary()] if result.has_log else []
    summaries.append(result.unconditional.summary())
    for key, label, metric in (
        ("remaining_days", "days to go", "remaining_days"),
        ("total_days", "total days", "total_days"),
        ("cost_to_go_usd", "cost to go", "cost_usd"),
    ):
        for stat in ("mean", "p50", "p95"):
            # in days, as the rows' names say, and costs as money: one style with run's answer
            table.add_row(f"{label} {stat}", *(
                answer.readable(metric, s[key][stat], unit="days" if metric != "cost_usd" else None)
                if s[key][stat] is not None else "—" for s in summaries
            ))  # fmt: skip
    if deadline_days is not None:
        table.add_row(
            f"P(done by day {deadline_days:g})", *(answer.share(s["p_deadline"]) for s in summaries)
        )
    if any(s["unfinished"] for s in summaries):
        table.add_row(
            "unfinished by the horizon", *(answer.share(s["unfinished"]) for s in summaries)
        )
    show(screen, table)
