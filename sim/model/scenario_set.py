"""What loading a scenario gives: a `ScenarioSet` of validated sweep `Point`s, or a
`ScenarioError` naming the file, the key path and what was expected; and the limits on the
input itself, so that no file or command line can exhaust memory or the stack before
validation has a chance to name the problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.model.schema import MAX_ECHO, Scenario

# Limits on the input itself, so that no file or command line can exhaust memory or
# the stack before validation has a chance to name the problem.
MAX_FILE_BYTES = 1_000_000  # a scenario file; the shipped ones are ~2 kB
MAX_DEPTH = 20  # nesting of mappings and lists, aliases expanded (the schema needs ~6)
MAX_NODES = 100_000  # values in a document once its aliases are expanded
MAX_POINTS = 10_000  # sweep points (the product of the sweep lists' lengths)
MAX_PROBLEMS = 5  # validation problems listed in one message


class ScenarioError(Exception):
    """Bad input: a one-paragraph message naming the file and key path."""

    def __init__(self, source: str, path: str, message: str):
        self.source, self.path, self.message = source, path, message
        shown = path if len(path) <= 2 * MAX_ECHO else path[: 2 * MAX_ECHO - 3] + "..."
        where = f"{source}: {shown}: " if path else f"{source}: "
        super().__init__(where + message)


@dataclass(frozen=True)
class Point:
    """One sweep point: the swept values that produced it and the scenario."""

    index: int
    params: dict[str, Any]
    scenario: Scenario
    # why this configuration cannot run (key path: reason), for a sweep point the model
    # refuses; None when it can run. A single-point scenario is refused outright instead.
    infeasible: str | None = None


@dataclass(frozen=True)
class ScenarioSet:
    """A loaded scenario file: the resolved raw document and its sweep points."""

    source: str
    resolved: dict[str, Any]  # the document as run: overrides applied, sweep kept
    points: list[Point]
    # what loading changed beyond the keys given, for the user (the CLI prints them on
    # stderr): e.g. a tier whose kind an override or sweep changed starts from its preset
    notes: list[str] = field(default_factory=list)
    # the --set assignments as given, in order: what the figures' labels say was overridden
    overrides: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.points[0].scenario.name

    @property
    def base(self) -> Scenario:
        return self.points[0].scenario

    @property
    def swept_keys(self) -> list[str]:
        """Every key of the sweep: the points' params, the tables' columns."""
        return list(self.resolved.get("sweep") or {})

    @property
    def varied_keys(self) -> list[str]:
        """The swept keys with more than one value: the sweep's axes. A key swept with one
        value (a figure --set holds at every point of a kind sweep) is the same at every
        point: a column of the tables, but no axis of a figure, a plan or `optimize`."""
        sweep = self.resolved.get("sweep") or {}
        return [key for key, values in sweep.items() if len(values) > 1]

    @property
    def feasible(self) -> list[Point]:
        """The points that can run (`infeasible` is None): the only ones simulated."""
        return [p for p in self.points if p.infeasible is None]

    @property
    def runnable_base(self) -> Scenario:
        """The first point that can run (the first point when none can): what the
        performance model describes when a sweep has infeasible points."""
        return (self.feasible or self.points)[0].scenario
