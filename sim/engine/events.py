"""Interrupt causes the job process receives (CONVENTIONS: a cause object, never a string)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Failure:
    """A failure of one component the job uses; `node` is the node slot (None: the job itself)."""

    class_index: int
    name: str
    time_s: float
    node: int | None
    detect_s: float
    replace: bool
    repair_mean_s: float


@dataclass(frozen=True)
class NodesAvailable:
    """A node came back from repair into the warm spares."""

    time_s: float
