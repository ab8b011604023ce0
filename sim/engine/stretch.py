"""A stretch of training: closed-form position inside a run of checkpoint cycles.

From its start the job computes up to the next checkpoint boundary, takes the
checkpoint's blocking part (`snapshot_s`: the whole write when sync, the
device-to-host copy when async), and goes on computing while the checkpoint
drains to the tier in the background (`drain_s`, zero when sync); the
checkpoint is durable when its drain ends, and the next snapshot waits for the
previous drain. This repeats every `interval_steps` until `total_steps`, whose
checkpoint is the final one: the run ends when it is durable.

Nothing changes inside a stretch, so the engine schedules one event for all of
it and, when interrupted, asks `position(elapsed)` what became durable. A
stretch may begin part-way into an interval (`done_steps` computed,
`snapped_s` of the snapshot taken) and with an earlier snapshot still draining
(`pending_drain_s`), when the step time changed mid-interval.

Times: snapshot j ends at S_j; it is durable at T_j = S_j + drain.
  S_1 = max(c_1, pending_drain) + (snapshot − snapped),  S_j = S_{j−1} + max(c_j, drain) + snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---- the schedule of a plain stretch (every step at one step time, no in-memory level), as
# functions of plain figures: `Stretch` and the failure cycle in line (sim/engine/cycle.py)
# both call them, so each rule is written once


def plain_schedule(
    start_step: int,
    total_steps: int,
    interval_steps: int,
    step_s: float,
    snapshot_s: float,
    drain_s: float,
    done_steps: float,
    snapped_s: float,
    pending_drain_s: float,
) -> tuple[int, float, float, float, float, int, int, float, int, float, float]:
    """A plain stretch's schedule: (steps of the first window, its work, S_1, a full
    window's work, a full cycle, full cycles after the first, steps of the tail, its work,
    checkpoints, when the tail's snapshot would end, S_n the last snapshot's end)."""
    first = min(interval_steps, total_steps - start_step)
    first_work = (first - done_steps) * step_s
    first_s = max(first_work, pending_drain_s) + (snapshot_s - snapped_s)
    full_work = interval_steps * step_s
    cycle_s = max(full_work, drain_s) + snapshot_s
    full_cycles, tail_steps = divmod(total_steps - start_step - first, interval_steps)
    tail_work = tail_steps * step_s
    tail_end = first_s + full_cycles * cycle_s + max(tail_work, drain_s) + snapshot_s
    if tail_steps:
        checkpoints, last_end = 2 + full_cycles, tail_end
    else:
        checkpoints, last_end = 1 + full_cycles, first_s + full_cycles * cycle_s
    return (
        first,
        first_work,
        first_s,
        full_work,
        cycle_s,
        full_cycles,
        tail_steps,
        tail_work,
        checkpoints,
        tail_end,
        last_end,
    )


def checkpoint_step(
    k: int, start_step: int, first_steps: int, interval_steps: int, total_steps: int
) -> int:
    """The step checkpoint k of a stretch from `start_step` saves (0: the start)."""
    if k == 0:
        return start_step
    return min(total_steps, start_step + first_steps + (k - 1) * interval_steps)


def snapshot_end(
    j: int, first_s: float, cycle_s: float, full_cycles: int, tail_end: float
) -> float:
    """S_j: when snapshot j (1-based) ends; the tail's (j past the full cycles) at `tail_end`."""
    if j <= 0:
        return 0.0
    if j <= 1 + full_cycles:
        return first_s + (j - 1) * cycle_s
    return tail_end


def kept_compute(k: int, full_cycles: int, first: float, full: float, tail: float) -> float:
    """Compute of a stretch's first k windows: the first window's, the identical full
    ones', and the tail's."""
    if k == 0:
        return 0.0
    last_full = 1 + full_cycles
    count = min(k, last_full) - 1
    total = first + (count * full if count > 0 else 0.0)
    if k > last_full:
        total += tail
    return total


def sync_window(
    elapsed_s: float,
    first_s: float,
    cycle_s: float,
    full_cycles: int,
    checkpoints: int,
    tail_end: float,
    first_work: float,
    full_work: float,
    tail_work: float,
) -> tuple[int, float, float, float, float]:
    """`elapsed_s` into a plain stretch with sync checkpoints and no drain, before its end:
    (k snapshots ended, hence durable; S_k; the compute of those k windows; the compute and
    the snapshot time of the window since)."""
    if elapsed_s < first_s:  # S_1
        k, kept_s = 0, 0.0
    else:  # before the stretch's end: k < checkpoints
        k = 1 + int((elapsed_s - first_s) // cycle_s)
        k = max(1, min(k, checkpoints - 1))
        while (
            k + 1 <= checkpoints
            and snapshot_end(k + 1, first_s, cycle_s, full_cycles, tail_end) <= elapsed_s
        ):
            k += 1
        kept_s = snapshot_end(k, first_s, cycle_s, full_cycles, tail_end)
        while k >= 1 and kept_s > elapsed_s:
            k -= 1
            kept_s = snapshot_end(k, first_s, cycle_s, full_cycles, tail_end)
    window_s = elapsed_s - kept_s
    if k < checkpoints:
        # the work toward snapshot k + 1
        work = first_work if k == 0 else (full_work if k + 1 <= 1 + full_cycles else tail_work)
        window_compute_s = min(window_s, work)
        window_snapshot_s = max(0.0, window_s - max(work, 0.0))
    else:
        window_compute_s = window_snapshot_s = 0.0
    compute = kept_compute(k, full_cycles, first_work, full_work, tail_work)
    return k, kept_s, compute, window_compute_s, window_snapshot_s


@dataclass(slots=True)
class Position:
    """Where the job is `elapsed` seconds into a stretch (not frozen: one is built per
    failure, and a frozen dataclass's __init__ costs a call per field)."""

    checkpoints: int  # checkpoints of this stretch made durable
    pending_durable: bool  # the snapshot draining at the stretch's start became durable
    durable_step: int
    kept_s: float  # stretch time that belongs to durable checkpoints (before S_k, or all when done)
    kept_compute_s: float  # of which compute
    snapshots: int  # snapshots completed in this stretch (durable or not)
    window_s: float  # time since the last completed snapshot (or the stretch start)
    window_compute_s: float  # of which compute toward the next checkpoint
    window_snapshot_s: float  # of which on the next snapshot
    last_window_s: float  # the window that ended with the last completed snapshot, if not durable
    last_window_compute_s: float
    aborted_write: bool  # a blocking write was in progress (sync: the checkpoint is lost)


class Stretch:
    """Immutable; derived figures are computed once (this is on the engine's hot path)."""

    __slots__ = (
        "start_step",
        "durable_before",
        "total_steps",
        "interval_steps",
        "step_s",
        "snapshot_s",
        "drain_s",
        "pending_drain_s",
        "first_steps",
        "done_steps",
        "memory_every",
        "memory_s",
        "slow_step_s",
        "first_work_s",
        "full_work_s",
        "tail_work_s",
        "plain",
        "first_s",
        "cycle_s",
        "full_cycles",
        "tail_steps",
        "checkpoints",
        "last_snapshot_end_s",
        "tail_end_s",
        "duration_s",
    )

    def __init__(
        self,
        start_step: int,
        total_steps: int,
        interval_steps: int,
        step_s: float,
        snapshot_s: float,
        drain_s: float = 0.0,
        done_steps: float = 0.0,
        snapped_s: float = 0.0,
        pending_drain_s: float = 0.0,
        durable_before: int | None = None,
        memory_every: int = 0,
        memory_s: float = 0.0,
        slow_step_s: float | None = None,
    ):
        self.start_step = start_step
        self.durable_before = start_step if durable_before is None else durable_before
        self.total_steps = total_steps
        self.interval_steps = interval_steps
        self.step_s = step_s
        self.snapshot_s = snapshot_s
        self.drain_s = drain_s
        self.pending_drain_s = pending_drain_s
        self.first_steps = min(interval_steps, total_steps - start_step)
        self.done_steps = done_steps
        self.memory_every = memory_every
        self.memory_s = memory_s
        # steps that overlap a drain run at `slow_step_s` when reads share the tier with it
        self.slow_step_s = step_s if slow_step_s is None else slow_step_s
        if not memory_every and self.slow_step_s == step_s and memory_s == 0.0:
            # the common case in line: every step at `step_s`, no in-memory checkpoints (the
            # same arithmetic as the general case below, whose extra terms are all zero)
            self.plain = True
            (
                _,
                self.first_work_s,
                self.first_s,
                self.full_work_s,
                self.cycle_s,
                self.full_cycles,
                self.tail_steps,
                self.tail_work_s,
                self.checkpoints,
                self.tail_end_s,
                self.last_snapshot_end_s,
            ) = plain_schedule(
                start_step,
                total_steps,
                interval_steps,
                step_s,
                snapshot_s,
                drain_s,
                done_steps,
                snapped_s,
                pending_drain_s,
            )
            self.duration_s = self.last_snapshot_end_s + drain_s
            return
        assert not (memory_every and self.slow_step_s != step_s), (
            "contended drains with an in-memory level"
        )
        self.first_work_s = self._work(self.first_steps - done_steps, pending_drain_s)
        self.first_work_s += self._memory_snapshots(done_steps, self.first_steps) * memory_s
        self.first_s = max(self.first_work_s, pending_drain_s) + (snapshot_s - snapped_s)
        self.plain = not memory_every and self.slow_step_s == step_s  # the fast, common case
        self.full_work_s = self._work(interval_steps, drain_s)
        self.full_work_s += self._memory_snapshots(0, interval_steps) * memory_s
        self.cycle_s = max(self.full_work_s, drain_s) + snapshot_s
        rest = total_steps - start_step - self.first_steps
        self.full_cycles, self.tail_steps = divmod(rest, interval_steps)
        self.tail_work_s = self._work(self.tail_steps, drain_s)
        self.tail_work_s += self._memory_snapshots(0, self.tail_steps) * memory_s
        self.checkpoints = 1 + self.full_cycles + (1 if self.tail_steps else 0)
        self.tail_end_s = (
            self.first_s
            + self.full_cycles * self.cycle_s
            + max(self.tail_work_s, drain_s)
            + snapshot_s
        )
        self.last_snapshot_end_s = self.snapshot_end_s(self.checkpoints)
        self.duration_s = self.last_snapshot_end_s + drain_s

    # ---- the schedule

    def snapshot_end_s(self, j: int) -> float:
        """S_j: when snapshot j (1-based) ends."""
        return snapshot_end(j, self.first_s, self.cycle_s, self.full_cycles, self.tail_end_s)

    def durable_s(self, j: int) -> float:
        """T_j: when checkpoint j is durable (the last one: when the stretch ends)."""
        return self.duration_s if j >= self.checkpoints else self.snapshot_end_s(j) + self.drain_s

    def snapshot_start_s(self, j: int) -> float:
        """When snapshot j (1-based) starts: after its compute and the previous drain."""
        if j == 1:
            return max(self.first_work_s, self.pending_drain_s)
        return self.snapshot_end_s(j) - self.snapshot_s

    # ---- the compute phase of a window, with in-memory checkpoints inside it

    def _memory_snapshots(self, done: float, steps: int) -> int:
        """In-memory checkpoints after step multiples of `memory_every` in (done, steps)."""
        m = self.memory_every
        if not m:
            return 0
        return max(0, (steps - 1) // m - int(done // m))

    def window_steps(self, j: int) -> tuple[float, int]:
        """(steps already done, steps at the boundary) of window j, relative to its base."""
        if j == 1:
            return self.done_steps, self.first_steps
        return 0.0, self.interval_steps if j <= 1 + self.full_cycles else self.tail_steps

    def _work(self, steps: float, overlap_s: float) -> float:
        """Time for `steps` steps when the first `overlap_s` seconds run at the slow step."""
        if self.slow_step_s == self.step_s or steps * self.slow_step_s <= overlap_s:
            return steps * self.slow_step_s
        return overlap_s + (steps - overlap_s / self.slow_step_s) * self.step_s

    def _overlap_s(self, j: int) -> float:
        """How long a drain runs at the start of window j (the previous snapshot's)."""
        return self.pending_drain_s if j == 1 else self.drain_s

    def work_s(self, j: int) -> float:
        """The compute phase before snapshot j: its steps and the in-memory checkpoints."""
        if j == 1:
            return self.first_work_s
        return self.full_work_s if j <= 1 + self.full_cycles else self.tail_work_s

    def compute_s(self, j: int) -> float:
        """Compute before snapshot j (no checkpoint time; starved reads included)."""
        done, steps = self.window_steps(j)
        return self._work(steps - done, self._overlap_s(j))

    def progress(self, j: int, t: float) -> tuple[float, float, tuple[int, float] | None]:
        """`t` seconds into window j's compute phase: (steps done relative to the window's
        base, pure compute seconds, the newest completed in-memory checkpoint as (its step
        relative to the base, seconds into the window when it completed) or None)."""
        done, steps = self.window_steps(j)
        t = min(t, self.work_s(j))
        if self.plain:
            return done + t / self.step_s, t, None
        step_s, m, mem_s = self.step_s, self.memory_every, self.memory_s
        count = self._memory_snapshots(done, steps)
        if count == 0:
            overlap, slow = self._overlap_s(j), self.slow_step_s
            if slow == step_s or t <= overlap:
                return done + t / slow, t, None
            return done + overlap / slow + (t - overlap) / step_s, t, None
        first = (int(done // m) + 1) * m  # the first boundary after `done`
        lead = (first - done) * step_s
        if t < lead:
            return done + t / step_s, t, None
        block = mem_s + m * step_s
        i = min(int((t - lead) // block) + 1, count)  # boundaries reached
        into = t - lead - (i - 1) * block
        boundary = first + (i - 1) * m
        if into < mem_s:  # snapshot i in progress: the newest complete is i − 1
            newest = None if i == 1 else (boundary - m, lead + (i - 2) * block + mem_s)
            return float(boundary), (boundary - done) * step_s, newest
        compute = (boundary - done) * step_s + (into - mem_s)
        return (
            boundary + (into - mem_s) / step_s,
            compute,
            (boundary, lead + (i - 1) * block + mem_s),
        )

    def step_at_checkpoint(self, k: int) -> int:
        return checkpoint_step(
            k, self.start_step, self.first_steps, self.interval_steps, self.total_steps
        )

    def _count(self, elapsed_s: float, end) -> int:
        """How many j in 1..checkpoints have end(j) <= elapsed (end is increasing)."""
        if elapsed_s < end(1):
            return 0
        if elapsed_s >= end(self.checkpoints):
            return self.checkpoints
        j = 1 + int((elapsed_s - end(1)) // self.cycle_s)
        j = max(1, min(j, self.checkpoints - 1))
        while j + 1 <= self.checkpoints and end(j + 1) <= elapsed_s:
            j += 1
        while j >= 1 and end(j) > elapsed_s:
            j -= 1
        return j

    # ---- positions

    def position(self, elapsed_s: float) -> Position:
        if elapsed_s >= self.duration_s:
            return self.at_checkpoint(self.checkpoints)
        if self.plain and self.drain_s == 0 and self.pending_drain_s == 0:
            return self._sync_position(elapsed_s)
        k = self._count(elapsed_s, self.durable_s)
        # without drains a snapshot is durable when it ends (sync): no second search
        w = (
            k
            if self.drain_s == 0 and self.pending_drain_s == 0
            else self._count(elapsed_s, self.snapshot_end_s)
        )
        pending = self.pending_drain_s > 0 and elapsed_s >= self.pending_drain_s
        kept_s = self.snapshot_end_s(k)
        window_start = self.snapshot_end_s(w)
        window_s = elapsed_s - window_start
        if w < self.checkpoints:
            gate = max(self.work_s(w + 1), self.pending_drain_s if w == 0 else self.drain_s)
            _, window_compute_s, _ = self.progress(w + 1, window_s)
            window_snapshot_s = max(0.0, window_s - gate)
        else:  # every snapshot is taken: only the final drain is left
            window_compute_s = window_snapshot_s = 0.0
        last_window_s = last_window_compute_s = 0.0
        if w > k:  # the last completed snapshot is still draining
            last_window_s = window_start - self.snapshot_end_s(w - 1)
            last_window_compute_s = self.compute_s(w)
        if k:
            durable = self.step_at_checkpoint(k)
        else:
            durable = self.start_step if pending else self.durable_before
        return Position(
            checkpoints=k,
            pending_durable=pending,
            durable_step=durable,
            kept_s=kept_s,
            kept_compute_s=self._kept_compute(k),
            snapshots=w,
            window_s=window_s,
            window_compute_s=window_compute_s,
            window_snapshot_s=window_snapshot_s,
            last_window_s=last_window_s,
            last_window_compute_s=last_window_compute_s,
            aborted_write=self.drain_s == 0 and window_snapshot_s > 0,
        )

    def _sync_position(self, elapsed_s: float) -> Position:
        """`position` of a plain stretch with sync checkpoints and no drain pending: a
        snapshot is durable when it ends (`sync_window`'s figures)."""
        k, kept_s, kept_compute_s, window_compute_s, window_snapshot_s = sync_window(
            elapsed_s,
            self.first_s,
            self.cycle_s,
            self.full_cycles,
            self.checkpoints,
            self.tail_end_s,
            self.first_work_s,
            self.full_work_s,
            self.tail_work_s,
        )
        return Position(
            k,  # checkpoints
            False,  # pending_durable
            self.step_at_checkpoint(k) if k else self.durable_before,  # durable_step
            kept_s,
            kept_compute_s,
            k,  # snapshots
            elapsed_s - kept_s,  # window_s
            window_compute_s,
            window_snapshot_s,
            0.0,  # last_window_s
            0.0,  # last_window_compute_s
            window_snapshot_s > 0,  # aborted_write
        )

    def _kept_compute(self, k: int) -> float:
        """Compute of the stretch's first k windows (starved reads included): `kept_compute`
        of the windows' compute (each its work when plain; only the windows k reaches)."""
        if self.plain:
            return kept_compute(
                k, self.full_cycles, self.first_work_s, self.full_work_s, self.tail_work_s
            )
        last_full = 1 + self.full_cycles
        return kept_compute(
            k,
            self.full_cycles,
            self.compute_s(1) if k else 0.0,
            self.compute_s(2) if min(k, last_full) > 1 else 0.0,
            self.compute_s(k) if k > last_full else 0.0,
        )

    def next_checkpoint(self, elapsed_s: float) -> int:
        """Number (1-based) of the first checkpoint that becomes durable after `elapsed_s`."""
        return min(self._count(elapsed_s, self.durable_s) + 1, self.checkpoints)

    def at_checkpoint(self, k: int) -> Position:
        """The position exactly when checkpoint `k` became durable (no float floor involved).

        Training after snapshot k (async) is in the window; at the last checkpoint the
        run is over and all of the stretch is kept.
        """
        final = k >= self.checkpoints
        when = self.duration_s if final else self.durable_s(k)
        kept_s = self.duration_s if final else self.snapshot_end_s(k)
        window_s = 0.0 if final else when - kept_s
        compute = 0.0 if final else self.progress(k + 1, window_s)[1]
        return Position(
            checkpoints=k,
            pending_durable=self.pending_drain_s > 0,
            durable_step=self.step_at_checkpoint(k),
            kept_s=kept_s,
            kept_compute_s=self._kept_compute(k),
            snapshots=k,
            window_s=window_s,
            window_compute_s=compute,
            window_snapshot_s=0.0,
            last_window_s=0.0,
            last_window_compute_s=0.0,
            aborted_write=False,
        )
