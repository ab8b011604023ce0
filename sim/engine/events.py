"""Interrupt causes the job process receives (CONVENTIONS: a cause object, never a string)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Failure:
    """A failure of one component the job uses.

    `nodes` are the job's node slots it takes out (none for the job itself or a
    fabric part); `component` indexes the class's components (a cable, a switch).
    A fixed `repair_s` brings the nodes back together (a leaf switch repaired).
    """

    class_index: int
    name: str
    time_s: float
    nodes: tuple[int, ...]
    detect_s: float
    replace: bool
    repair_mean_s: float
    scope: str = "job"
    component: int = 0
    repair_s: float | None = None
    loses_data: bool = False  # storage: the tier's checkpoints are gone
    since_s: float | None = None  # silent corruption: when it happened (found at time_s)


@dataclass(frozen=True)
class StorageChanged:
    """The checkpoint tier went down (perhaps losing its data) or came back."""

    time_s: float
    lost_data: bool


@dataclass(frozen=True)
class StepTimeChanged:
    """A slowdown source switched on or off (sim/engine/slowdown.py): the step time moved."""

    time_s: float


@dataclass(frozen=True)
class NodesAvailable:
    """A node came back from repair into the warm spares."""

    time_s: float


@dataclass(frozen=True)
class CheckpointWanted:
    """Maintenance is due or a node is to be drained: stop at the next checkpoint."""

    time_s: float


@dataclass(frozen=True)
class HealthCheck:
    """A health check of the job's nodes is due."""

    time_s: float


@dataclass(frozen=True)
class StragglerOnset:
    """A node of the job turns slow (injected by tests and what-ifs; the scenario needs a
    `stragglers:` section for its detection and repair)."""

    time_s: float
    slot: int
    slowdown: float
    clear_s: float = float("inf")
