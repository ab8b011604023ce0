"""A stretch of training: closed-form position inside a run of checkpoint cycles.

From a durable checkpoint the job computes `interval_steps`, writes a checkpoint,
and repeats until `total_steps` (whose checkpoint is the final one). Nothing
changes inside a stretch, so the engine schedules one event for all of it and,
when interrupted, asks `position(elapsed)` what was durable and what was lost.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Position:
    checkpoints: int  # durable checkpoints completed in this stretch
    durable_step: int
    pending_compute_s: float  # compute since the last durable checkpoint
    aborted_write_s: float  # time spent on a checkpoint write still in flight


class Stretch:
    """Immutable; the derived figures are computed once (this is on the engine's hot path)."""

    __slots__ = (
        "start_step",
        "total_steps",
        "interval_steps",
        "step_s",
        "write_s",
        "cycle_s",
        "full_cycles",
        "tail_steps",
        "checkpoints",
        "duration_s",
    )

    def __init__(
        self, start_step: int, total_steps: int, interval_steps: int, step_s: float, write_s: float
    ):
        self.start_step = start_step
        self.total_steps = total_steps
        self.interval_steps = interval_steps
        self.step_s = step_s
        self.write_s = write_s
        self.cycle_s = interval_steps * step_s + write_s
        self.full_cycles, self.tail_steps = divmod(total_steps - start_step, interval_steps)
        self.checkpoints = self.full_cycles + (1 if self.tail_steps else 0)
        tail_s = self.tail_steps * step_s + write_s if self.tail_steps else 0.0
        self.duration_s = self.full_cycles * self.cycle_s + tail_s

    def step_at_checkpoint(self, k: int) -> int:
        return min(self.total_steps, self.start_step + k * self.interval_steps)

    def position(self, elapsed_s: float) -> Position:
        if elapsed_s >= self.duration_s:
            return Position(self.checkpoints, self.total_steps, 0.0, 0.0)
        k = min(int(elapsed_s // self.cycle_s), self.full_cycles)
        offset = elapsed_s - k * self.cycle_s
        steps = self.interval_steps if k < self.full_cycles else self.tail_steps
        compute_s = steps * self.step_s
        if offset <= compute_s:
            return Position(k, self.step_at_checkpoint(k), offset, 0.0)
        return Position(k, self.step_at_checkpoint(k), compute_s, offset - compute_s)

    def next_checkpoint(self, elapsed_s: float) -> int:
        """Number (1-based) of the first checkpoint that becomes durable after `elapsed_s`."""
        return min(int(elapsed_s // self.cycle_s) + 1, self.checkpoints)

    def checkpoint_due_s(self, k: int) -> float:
        """Elapsed time at which checkpoint number `k` is durable."""
        return self.duration_s if k >= self.checkpoints else k * self.cycle_s

    def at_checkpoint(self, k: int) -> Position:
        """The position exactly when checkpoint `k` became durable (no float floor involved)."""
        return Position(k, self.step_at_checkpoint(k), 0.0, 0.0)
