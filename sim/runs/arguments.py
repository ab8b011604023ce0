"""The library's argument checks: what the command line's option types check
(sim/cli/arguments.py), for notebooks and scripts that call the library. A wrong type or
value raises ArgumentError naming the function, the argument and what was expected, before
anything is read, written or simulated; never an AttributeError from deep inside."""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path
from typing import Any

from sim.model.scenario_set import MAX_POINTS, ScenarioError, ScenarioSet
from sim.model.schema import EXECUTORS, MAX_COUNT, MAX_DAYS, MAX_REPLICAS, MAX_SEED

# Worker processes (or, with a Dask scheduler, the cluster's workers, which size chunks):
# more than any one machine has cores, and than a run of MAX_REPLICAS can keep busy.
MAX_WORKERS = 4096


class ArgumentError(ScenarioError, ValueError):
    """A library function was given an argument it cannot use: "function: argument:
    expected ..., not ...". A ScenarioError (bad input, as the command line says it) and a
    ValueError (as Python says it)."""

    def __init__(self, function: str, argument: str, message: str):
        super().__init__(function, argument, message)
        self.function, self.argument = function, argument


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def whole_number(function: str, argument: str, value: Any, low: int, high: int) -> int:
    """An int (numpy's too) within [low, high]; not a bool, a float or a string."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentError(
            function, argument, f"expected a whole number from {low:,} to {high:,}, "
            f"not {_shown(value)} ({type(value).__name__})",
        )  # fmt: skip
    if not low <= int(value) <= high:
        raise ArgumentError(
            function, argument, f"expected a whole number from {low:,} to {high:,}, not {value:,}"
        )
    return int(value)


def number(
    function: str, argument: str, value: Any, low: float, high: float, low_open: bool = False
) -> float:
    """A finite real number within [low, high] ((low, high] with `low_open`); not a bool."""
    bounds = f"{'more than' if low_open else 'at least'} {low:g} and at most {high:g}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentError(
            function, argument, f"expected a number {bounds}, not {_shown(value)} "
            f"({type(value).__name__})",
        )  # fmt: skip
    value = float(value)
    if not math.isfinite(value):
        raise ArgumentError(function, argument, f"{value!r} is not a finite number")
    if value < low or (low_open and value == low) or value > high:
        raise ArgumentError(function, argument, f"expected a number {bounds}, not {value:g}")
    return value


def replicas(function: str, value: Any, low: int = 1) -> int | None:
    """Replicas per sweep point, or None (the scenario's simulation.replicas)."""
    return None if value is None else whole_number(function, "replicas", value, low, MAX_REPLICAS)


def seed(function: str, value: Any) -> int | None:
    """A base seed, or None (the scenario's simulation.seed)."""
    return None if value is None else whole_number(function, "seed", value, 0, MAX_SEED)


def workers(function: str, value: Any) -> int | None:
    return None if value is None else whole_number(function, "workers", value, 1, MAX_WORKERS)


def count(function: str, argument: str, value: Any) -> int | None:
    """A count of things (nodes, GPUs per node), or None."""
    return None if value is None else whole_number(function, argument, value, 1, MAX_COUNT)


def days(function: str, argument: str, value: Any, zero: bool = False) -> float | None:
    """A duration in days (0 allowed with `zero`: elapsed days, a deadline), or None."""
    if value is None:
        return None
    return number(function, argument, value, 0.0, MAX_DAYS, low_open=not zero)


def share(function: str, argument: str, value: Any) -> float | None:
    """A share in (0, 1] (a relative CI half-width, a quantile), or None."""
    return None if value is None else number(function, argument, value, 0.0, 1.0, low_open=True)


def choice(function: str, argument: str, value: Any, choices: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in choices:
        raise ArgumentError(
            function, argument, f"expected one of {', '.join(choices)}, not {_shown(value)}"
        )
    return value


def path(function: str, argument: str, value: Any) -> Path:
    """A path (str or os.PathLike)."""
    if isinstance(value, bool) or not isinstance(value, str | os.PathLike) or not str(value):
        raise ArgumentError(
            function, argument, f"expected a path (str or pathlib.Path), not {_shown(value)}"
        )
    return Path(value)


def scenario(function: str, value: Any) -> str | Path | ScenarioSet:
    """A scenario file's path, or a scenario loaded by sim.model.scenario.load_scenario."""
    if isinstance(value, ScenarioSet):
        return value
    if isinstance(value, bool) or not isinstance(value, str | os.PathLike) or not str(value):
        raise ArgumentError(
            function, "scenario", "expected a scenario file's path (str or pathlib.Path) or a "
            f"ScenarioSet (sim.model.scenario.load_scenario), not {_shown(value)}",
        )  # fmt: skip
    return value


def texts(function: str, argument: str, value: Any, example: str) -> list[str] | None:
    """A list of strings (overrides KEY=VALUE, --param KEY=V1,V2), or None; a lone string is
    refused (it would be read one character at a time)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ArgumentError(
            function, argument, f"expected a list of strings like [{example!r}], "
            f"not {_shown(value)}",
        )  # fmt: skip
    for item in value:
        if not isinstance(item, str):
            raise ArgumentError(
                function, argument, f"expected strings like {example!r}, not {_shown(item)}"
            )
    return list(value)


def points(function: str, value: Any) -> range | None:
    """A slice of sweep points: range(I, J), what the command line's --points I:J gives."""
    if value is None:
        return None
    if not isinstance(value, range) or value.step != 1:
        raise ArgumentError(
            function, "points", "expected a range of sweep points, e.g. range(0, 2) for points "
            f"0 and 1 (the command line's --points 0:2), not {_shown(value)}",
        )  # fmt: skip
    if not 0 <= value.start < value.stop <= MAX_POINTS:
        raise ArgumentError(
            function, "points", f"expected range(I, J) with 0 <= I < J <= {MAX_POINTS:,}, "
            f"not {_shown(value)}",
        )  # fmt: skip
    return value


def executor(function: str, value: Any) -> str | None:
    return choice(function, "executor", value, EXECUTORS)
