"""A stretch of training: closed-form position inside a run of checkpoint cycles.

From its start the job computes up to the next checkpoint boundary, writes the
checkpoint, and repeats every `interval_steps` until `total_steps` (whose
checkpoint is the final one). Nothing changes inside a stretch, so the engine
schedules one event for all of it and, when interrupted, asks
`position(elapsed)` what became durable and what is still pending.

A stretch may begin part-way into its first interval (`done_steps` already
computed, `written_s` of the checkpoint already written) when the step time
changed mid-interval, e.g. because the fabric degraded.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Position:
    checkpoints: int  # durable checkpoints completed in this stretch
    durable_step: int
    pending_compute_s: float  # compute in this stretch since the last durable checkpoint
    aborted_write_s: float  # time in this stretch on a checkpoint write still in flight


class Stretch:
    """Immutable; the derived figures are computed once (this is on the engine's hot path)."""

    __slots__ = (
        "start_step",
        "total_steps",
        "interval_steps",
        "step_s",
        "write_s",
        "first_steps",
        "first_compute_s",
        "first_s",
        "cycle_s",
        "full_cycles",
        "tail_steps",
        "checkpoints",
        "duration_s",
    )

    def __init__(
        self,
        start_step: int,
        total_steps: int,
        interval_steps: int,
        step_s: float,
        write_s: float,
        done_steps: float = 0.0,
        written_s: float = 0.0,
    ):
        self.start_step = start_step
        self.total_steps = total_steps
        self.interval_steps = interval_steps
        self.step_s = step_s
        self.write_s = write_s
        self.first_steps = min(interval_steps, total_steps - start_step)
        self.first_compute_s = (self.first_steps - done_steps) * step_s
        self.first_s = self.first_compute_s + (write_s - written_s)
        self.cycle_s = interval_steps * step_s + write_s
        rest = total_steps - start_step - self.first_steps
        self.full_cycles, self.tail_steps = divmod(rest, interval_steps)
        self.checkpoints = 1 + self.full_cycles + (1 if self.tail_steps else 0)
        tail_s = self.tail_steps * step_s + write_s if self.tail_steps else 0.0
        self.duration_s = self.first_s + self.full_cycles * self.cycle_s + tail_s

    def step_at_checkpoint(self, k: int) -> int:
        if k == 0:
            return self.start_step
        return min(
            self.total_steps, self.start_step + self.first_steps + (k - 1) * self.interval_steps
        )

    def position(self, elapsed_s: float) -> Position:
        if elapsed_s >= self.duration_s:
            return Position(self.checkpoints, self.total_steps, 0.0, 0.0)
        if elapsed_s < self.first_s:
            compute_s, k, offset = self.first_compute_s, 0, elapsed_s
        else:
            later = elapsed_s - self.first_s
            j = min(int(later // self.cycle_s), self.full_cycles)
            k, offset = 1 + j, later - j * self.cycle_s
            steps = self.interval_steps if j < self.full_cycles else self.tail_steps
            compute_s = steps * self.step_s
        if offset <= compute_s:
            return Position(k, self.step_at_checkpoint(k), offset, 0.0)
        return Position(k, self.step_at_checkpoint(k), compute_s, offset - compute_s)

    def next_checkpoint(self, elapsed_s: float) -> int:
        """Number (1-based) of the first checkpoint that becomes durable after `elapsed_s`."""
        if elapsed_s < self.first_s:
            return 1
        return min(int((elapsed_s - self.first_s) // self.cycle_s) + 2, self.checkpoints)

    def checkpoint_due_s(self, k: int) -> float:
        """Elapsed time at which checkpoint number `k` is durable."""
        if k >= self.checkpoints:
            return self.duration_s
        return self.first_s + (k - 1) * self.cycle_s

    def at_checkpoint(self, k: int) -> Position:
        """The position exactly when checkpoint `k` became durable (no float floor involved)."""
        return Position(k, self.step_at_checkpoint(k), 0.0, 0.0)
