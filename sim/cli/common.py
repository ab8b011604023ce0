"""What the sub-commands share: the common options, the console tables go to, loading a
scenario (its notes said), warnings, a stop's exit (130, with the command that resumes),
and number formats.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console

from sim.cli import arguments
from sim.decide import answer, compare
from sim.model import feasibility
from sim.model.columns import unit_of
from sim.model.scenario import load_scenario
from sim.model.scenario_set import ScenarioSet
from sim.runs.api import RunInterrupted
from sim.runs.manifest import resume_command
from sim.show import console as screen
from sim.show.run_figures import write_run_figures


def exit_stopped() -> NoReturn:
    """Exit 130 after a stop. SIGINT and SIGTERM are ignored from here on: Python puts its
    own handlers back to the default while it shuts down, and another Ctrl-C in that last
    moment would kill the process (exit -2) after the stop was handled."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(signum, signal.SIG_IGN)
    sys.exit(130)


def say_interrupted(stop: RunInterrupted, tail: str = "", counted: bool = True) -> NoReturn:
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
    exit_stopped()


def refuse_with_resume(**given: Any) -> None:
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
    envvar=arguments.RESULTS_ENV,
    show_default=True,
    help=f"Results root [${arguments.RESULTS_ENV}, else results].",
)


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


def figure_writer(figures: bool):
    """The figure writer a run is finalised with: the standard set, or none (--no-figures)."""
    return write_run_figures if figures else None


def finite_or_none(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


def table_console() -> Console:
    """Tables on stdout, as wide as the terminal or COLUMNS (sim/show/console.py)."""
    return screen.stdout_console()


def load(path: Path, overrides=(), params=()) -> ScenarioSet:
    """Every command reads its scenario file here: --set and --param (or --vary) applied, the
    sweep expanded, validated. What the loader did beyond the keys given (its notes, e.g. a
    storage tier whose changed kind starts from the new preset) is said on stderr."""
    loaded = load_scenario(path, list(overrides), list(params))
    for note in loaded.notes:
        print(f"note: {note}", file=sys.stderr)
    return loaded


def params_text(params: dict) -> str:
    return ", ".join(f"{k}={answer.value_text(v)}" for k, v in params.items())


def warn_infeasible(loaded: ScenarioSet) -> None:
    """Sweep points that cannot run (they will be rows marked infeasible): on stderr."""
    for point in loaded.points:
        if point.infeasible is not None:
            print(f"warning: sweep point {point.params}: infeasible: {point.infeasible}",
                  file=sys.stderr)  # fmt: skip


def warn(problems: list[feasibility.Problem], source: Path | str | None = None) -> None:
    """What the model warns of (points no replica of which can finish, memory estimates near
    the GPU's memory): said on stderr, naming `source` (the file) when given."""
    where = f"{source}: " if source is not None else ""
    for problem in problems:
        print(f"warning: {where}{problem.where()}{problem.message}", file=sys.stderr)


def metric_text(metric: str, value: float, unit: bool = True) -> str:
    """A metric's value with its unit: $29,460 for costs, 12.3 h for hours, 16.2 days
    (the number as compare.fmt_metric writes it, from sim/decide/answer.py's helpers)."""
    text = compare.fmt_metric(metric, value)
    suffix = unit_of(metric)
    return f"{text} {suffix}" if unit and suffix and suffix != "USD" and text != "—" else text


def plain_json(value):
    return value.item() if hasattr(value, "item") else str(value)


def number_text(value: float) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    text = answer.figure(abs(value))
    return "-" + text if value < 0 and text != "0" else text
