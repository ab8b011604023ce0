"""The time ledger: every wall-clock second of a replica booked to one bucket of the
identity wall = ideal + slowdown + lost_work + checkpoint_stall + downtime
(docs/metrics.md), the counters next to it, and the optional event timeline."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.model import columns


@dataclass
class Ledger:
    """Tallies of wall-clock seconds by where they went (the time identity, docs/metrics.md)."""

    ideal_s: float = 0.0
    slowdown_s: float = 0.0
    lost_work_s: float = 0.0
    checkpoint_stall_s: float = 0.0
    downtime_s: float = 0.0
    # the parts of downtime (DOWNTIME_PARTS), summing to it
    detect_s: float = 0.0  # until a failure is noticed
    node_wait_s: float = 0.0  # waiting for nodes: back from repair, or from a pool
    restart_s: float = 0.0  # requeue, launch and collective init
    checkpoint_load_s: float = 0.0  # reading the checkpoint back (tier or backup)
    rescale_s: float = 0.0  # an elastic job re-forming at a new size
    storage_wait_s: float = 0.0  # the checkpoint tier is down
    maintenance_s: float = 0.0  # planned maintenance windows
    health_check_s: float = 0.0  # health checks run on the job's nodes
    human_wait_s: float = 0.0  # waiting for the on-call engineer
    checkpoints_written: int = 0
    checkpoints_lost: int = 0  # snapshots or writes lost before they were durable
    restores_from_backup: int = 0
    restarts: int = 0
    health_checks: int = 0
    nodes_drained: int = 0  # caught by a health check and drained at a checkpoint
    failures_lemon: int = 0  # node-attributable failures of nodes with a fault
    rollbacks_beyond_newest: int = 0  # recoveries that restarted before the newest checkpoint
    rollback_exhausted: int = 0  # ... whose wanted checkpoint keep_last had deleted
    checkpoints_corrupt: int = 0  # corrupt checkpoints found (at a load, or by validation)
    stragglers: int = 0  # slow nodes that dragged the job
    straggler_s: float = 0.0  # wall time with at least one straggler in the job
    failures: list[int] = field(default_factory=list)

    @property
    def total_s(self) -> float:
        return (
            self.ideal_s
            + self.slowdown_s
            + self.lost_work_s
            + self.checkpoint_stall_s
            + self.downtime_s
        )


# The ledger attributes that split downtime, in the order the outputs list them.
DOWNTIME_PARTS = tuple(f"{part}_s" for part in columns.DOWNTIME_PARTS)


def excess_s(total_s: float, nominal_s: float) -> float:
    """`total_s − nominal_s`, reading a difference within the float rounding of the two sums
    as zero, so that no bucket of the identity turns negative by noise (-1e-14, -0.0); a
    genuine negative, which would be a bug, still shows."""
    diff = total_s - nominal_s
    return 0.0 if abs(diff) <= 1e-12 * max(abs(total_s), abs(nominal_s)) else diff


def record(
    timeline: list[dict] | None, name: str, start_s: float, duration_s: float, **args
) -> None:
    """Append one event to the replica's timeline (when one is kept)."""
    if timeline is not None:
        timeline.append({"name": name, "start_s": start_s, "duration_s": duration_s, **args})
