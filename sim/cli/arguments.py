"""The command line's value types: one finite-float and one bounded-integer click type
that every numeric option uses (so that nan, inf, 10**30 or a superscript digit is refused
as bad input, exit 2, naming the option), the I:J slice of sweep points, and the limits
the options share with the scenario schema."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import click

from sim.model.scenario_set import MAX_POINTS
from sim.model.schema import MAX_COUNT, MAX_DAYS, MAX_REPLICAS, MAX_SEED
from sim.runs.arguments import MAX_WORKERS  # one limit for the command line and the library

_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")  # ASCII digits only: not "²", "١", "1_000"


class FiniteFloat(click.FloatRange):
    """A float within [min, max] (open where said) that must be finite: nan and inf are
    refused before the range is checked (a comparison with nan is always false)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


class BoundedInt(click.IntRange):
    """A whole number written in ASCII digits, within [min, max]; max is required, so that
    no option takes a number no run could use (10**30 workers)."""

    name = "integer"

    def __init__(self, min: int, max: int):  # noqa: A002 - click's names
        super().__init__(min=min, max=max)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not _INTEGER.fullmatch(value):
            self.fail(f"{value!r} is not a whole number (digits 0-9)", param, ctx)
        return super().convert(value, param, ctx)


class PointSlice(click.ParamType):
    """I:J, the sweep points I..J-1 (0 <= I < J <= MAX_POINTS): a `range`."""

    name = "I:J"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, range):
            return value
        first, sep, last = str(value).partition(":")
        bound = BoundedInt(0, MAX_POINTS)
        if not sep or not _INTEGER.fullmatch(first) or not _INTEGER.fullmatch(last):
            self.fail(f"expected I:J (sweep points I..J-1), got {value!r}", param, ctx)
        start, stop = bound.convert(first, param, ctx), bound.convert(last, param, ctx)
        if start >= stop:
            self.fail(f"expected I < J in I:J (sweep points I..J-1), got {value!r}", param, ctx)
        return range(start, stop)


# the options' types, shared by every command
REPLICAS = BoundedInt(1, MAX_REPLICAS)
REPLICAS_2 = BoundedInt(2, MAX_REPLICAS)  # a comparison needs two
WORKERS = BoundedInt(1, MAX_WORKERS)
SEED = BoundedInt(0, MAX_SEED)
POINT = BoundedInt(0, MAX_POINTS - 1)
POINTS = PointSlice()
DAYS = FiniteFloat(min=0, min_open=True, max=MAX_DAYS)
SHARE = FiniteFloat(min=0, min_open=True, max=1)  # a share in (0, 1]
POSITIVE = FiniteFloat(min=0, min_open=True, max=1e6)  # a relative precision
DAYS_OR_ZERO = FiniteFloat(min=0, max=MAX_DAYS)  # elapsed days, a deadline
COUNT = BoundedInt(1, MAX_COUNT)  # nodes
GPUS_PER_NODE = BoundedInt(1, 1024)  # the schema's cluster.gpus_per_node
INDEX = BoundedInt(0, MAX_COUNT * 10)  # a replica or sweep point to pick
STEPS = BoundedInt(0, 10**15)  # training steps done
GPU_DAYS = FiniteFloat(min=0, min_open=True, max=1e12)  # an exposure

# The results root's environment variable (--out's default on every command that writes).
RESULTS_ENV = "TRAINSIM_RESULTS"


def check_workers(
    workers: int | None, executor: str | None, scenario_executor: str | None = None
) -> None:
    """More than one worker with the serial executor (--executor serial, or the scenario's
    simulation.executor: serial where no --executor is given) would be ignored: refused,
    exit 2, naming both, before anything is read or written."""
    effective = executor or scenario_executor
    if workers is None or workers <= 1 or effective != "serial":
        return
    which = "--executor serial" if executor else "the scenario's simulation.executor: serial"
    raise click.BadParameter(
        f"{workers} worker processes with {which}: the serial executor runs every replica "
        "in this process, one at a time; drop --workers, or give --executor processes",
        param_hint="--workers",
    )


def check_figure_path(path: Path) -> None:
    """A figure path whose suffix matplotlib can write (no suffix: PNG); else exit 2 naming
    --figure and the formats, before anything is read or written."""
    suffix = path.suffix.lower().lstrip(".")
    if not suffix:
        return
    from matplotlib.figure import Figure

    formats = Figure().canvas.get_supported_filetypes()
    if suffix not in formats:
        raise click.BadParameter(
            f"cannot write a figure as {path.suffix!r} ({path}); give a path ending in one of "
            + ", ".join(f".{name}" for name in sorted(formats)),
            param_hint="--figure",
        )


def different_scenarios(name_a: str, name_b: str) -> str:
    """compare's first line when the runs are of different scenarios."""
    return (
        f"A and B are runs of different scenarios ({name_a}, {name_b}): the differences "
        "below are between two scenarios, not an effect of one change; their replicas are "
        "not paired and their sweep points are not matched by value"
    )


# --------------------------------------------------------------------------- output helpers


def console():
    """A rich Console for tables on stdout, as wide as the terminal or COLUMNS."""
    from sim.show.console import stdout_console

    return stdout_console()
