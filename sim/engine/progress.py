"""Progress and rollback: which steps are durable, what is carried toward the next
checkpoint, and what a failure throws away.

The job computes in stretches (sim/engine/stretch.py). When a stretch ends, at a
checkpoint, a failure or a change of step time, `Progress` books its time: steps
covered by a durable checkpoint are kept (ideal + slowdown + checkpoint stall), work
not yet durable is carried into the next stretch or lost (rolled back). It also
keeps the fallbacks: the in-memory level, a snapshot still draining, and the
backup tier when the checkpoint tier loses its data.

The timeline (when one is kept) mirrors the ledger: the wall-clock spans of stretches
whose work is neither kept nor lost yet stay open, oldest first, and are traced when
the ledger resolves them: kept work from the oldest end ("train"), lost work from the
newest ("lost work"). Work kept and then no longer safe (the tier lost its data) is
taken back from the newest "train" events.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

import numpy as np
import simpy

from sim.engine.events import StorageChanged
from sim.engine.ledger import Ledger, excess_s, record
from sim.engine.plan import ReplicaPlan
from sim.engine.storage import Storage
from sim.engine.stretch import Stretch

# A span left over after resolving time from it, shorter than this, goes with it: the
# ledger's sums and the wall clock differ by float rounding (~1e-12 s), not by work.
SLIVER_S = 1e-9


@dataclass(frozen=True)
class PendingSnapshot:
    """A checkpoint snapshotted before the current stretch whose drain is still running."""

    steps: int  # beyond the last durable checkpoint
    compute_s: float
    other_s: float  # waits and the snapshot
    drain_left_s: float
    made_s: float = 0.0  # when its state was taken (the snapshot began)


@dataclass(frozen=True)
class Kept:
    """A durable checkpoint still kept on the tier (the newest `keep_last`), with what the
    ledger had kept when it became durable: a rollback to it takes the rest back."""

    step: int
    made_s: float  # when its state was taken: a corruption after it does not reach it
    ideal_s: float
    slowdown_s: float
    stall_s: float
    corrupt: bool  # found only when a restart loads it (without validation)
    on_backup: bool = False  # a copy on the backup tier (the checkpoint tier lost its data)


# The start of the run, as a rollback target (no load, nothing kept).
START = Kept(step=0, made_s=0.0, ideal_s=0.0, slowdown_s=0.0, stall_s=0.0, corrupt=False)


class Progress:
    """Lifecycle: created with the job at step 0; each stretch ends in `book` (a failure:
    keep what is durable, roll back the rest), `carry` (the step time changed: carry the
    work into the next stretch) or `book_durable` (a checkpoint boundary). `drop` rolls
    back to the last durable checkpoint."""

    def __init__(
        self,
        env: simpy.Environment,
        plan: ReplicaPlan,
        ledger: Ledger,
        timeline: list[dict] | None = None,
    ):
        self.env = env
        self.plan = plan
        self.ledger = ledger
        self.timeline = timeline
        self.storage: Storage | None = None  # set in the build phase when storage matters
        self.durable_step = 0
        self.resume_step = 0  # where the next stretch starts
        # carried across a step-time change: a snapshot still draining, and the work
        # toward the next checkpoint (compute, waits and snapshot so far)
        self.pending: PendingSnapshot | None = None
        self.next_compute_s = self.next_other_s = self.done_steps = self.snapped_s = 0.0
        self.durable_on_backup = False  # the rollback point lives only on the backup tier
        self.from_memory = False  # the next restart loads the in-memory checkpoint
        # timeline only: [start, end] of the work not yet kept or lost (pending snapshot,
        # then the work carried toward the next checkpoint), oldest first
        self.open_spans: list[list[float]] = []
        # the kept checkpoints, oldest first, when recovery may roll back past the newest
        self.kept: deque[Kept] | None = deque(maxlen=plan.keep_last) if plan.keeps_history else None
        self.deleted_any = False  # keep_last deleted an older checkpoint
        self.evicted: Kept | None = None  # the last one deleted (until the newest is safe)
        self.corrupt_u: np.ndarray | None = None  # a uniform per checkpoint written (by index)
        self.corrupt_rng: np.random.Generator | None = None
        # when the state the job trains on was taken: (wall time of each reset to a durable
        # checkpoint, when that checkpoint's state was taken), to tell whether a silent
        # corruption found later is still in it
        self.resets: list[tuple[float, float]] = []

    # ---- the kept checkpoints (loss spikes, silent corruption, corrupt checkpoints)

    def corrupt_flags(self, first: int, last: int) -> np.ndarray:
        """Whether each checkpoint written, the `first`-th to the `last`-th, is corrupt (one
        uniform per checkpoint written, drawn in blocks)."""
        u = self.corrupt_u
        if u is None or last >= u.size:
            fresh = self.corrupt_rng.random(max(1024, last + 1 - (0 if u is None else u.size)))
            u = self.corrupt_u = fresh if u is None else np.concatenate([u, fresh])
        return u[first : last + 1] < self.plan.corrupt_prob

    def is_corrupt(self, index: int) -> bool:
        """Whether the `index`-th checkpoint written (1-based) is corrupt."""
        return self.plan.corrupt_prob > 0.0 and bool(self.corrupt_flags(index, index)[0])

    def first_corrupt(self, first: int, last: int) -> int | None:
        """The first index in [first, last] of a corrupt checkpoint, or None."""
        if self.plan.corrupt_prob <= 0.0 or last < first:
            return None
        hits = np.flatnonzero(self.corrupt_flags(first, last))
        return first + int(hits[0]) if hits.size else None

    def _remember(
        self, step: int, made_s: float, kept: tuple[float, float, float], index: int
    ) -> None:
        history = self.kept
        if len(history) == history.maxlen:
            self.deleted_any = True
            self.evicted = history[0]
        corrupt = not self.plan.validate and self.is_corrupt(index)
        history.append(Kept(step, made_s, *kept, corrupt))

    def newest_corrupt(self) -> bool:
        """The checkpoint a restart would load is corrupt."""
        return bool(self.kept) and self.kept[-1].corrupt and self.kept[-1].step == self.durable_step

    def roll_back_checkpoints(self, n: int) -> None:
        """Restart from the `n`-th newest kept checkpoint (1: the newest, as usual); from the
        oldest kept one when keep_last has deleted it (rollback_exhausted)."""
        history, before = self.kept, self.durable_step
        if len(history) >= n:
            self.restore(history[-n])
        else:
            self._restore_oldest()
        if self.durable_step < before:
            self.ledger.rollbacks_beyond_newest += 1

    def roll_back_before(self, since_s: float) -> None:
        """Silent corruption since `since_s`: restart from the newest checkpoint taken before it;
        from the start when keep_last deleted it (every kept checkpoint holds corrupt state)."""
        history = self.kept
        for entry in reversed(history):
            if entry.made_s <= since_s:
                if entry.step != self.durable_step:
                    self.ledger.rollbacks_beyond_newest += 1
                self.restore(entry)
                return
        if self.durable_step > 0:
            self.ledger.rollbacks_beyond_newest += 1
        if self.deleted_any:
            self.ledger.rollback_exhausted += 1
        self.restore(START)

    def corruption_gone(self, since_s: float) -> bool:
        """Whether a silent corruption at `since_s` is no longer in the job's state: a recovery
        after it restarted from a checkpoint taken before it."""
        for reset_s, made_s in reversed(self.resets):
            if reset_s < since_s:
                return False
            if made_s <= since_s:
                return True
        return False

    def durable_made_s(self) -> float:
        """When the state of the durable checkpoint was taken (0: the start; the current time
        when it is not among the kept ones, e.g. a backup)."""
        history = self.kept
        if self.durable_step == 0:
            return 0.0
        if history and history[-1].step == self.durable_step:
            return history[-1].made_s
        return self.env.now

    def discard_newest(self) -> None:
        """The newest checkpoint is known corrupt (validation found it and its rewrite did not
        finish): restart from the previous one, which is deleted only once the newest is
        validated (so even keep_last 1 has it), or the start."""
        history = self.kept
        if history and history[-1].step == self.durable_step:
            history.pop()
        if history:
            self.restore(history[-1])
        else:
            self.restore(self.evicted or START)

    def mark_newest_corrupt(self) -> None:
        """The newest checkpoint stays corrupt (its rewrite was cut short by the tier going
        down): a restart that would load it falls back past it."""
        history = self.kept
        if history and history[-1].step == self.durable_step:
            history[-1] = replace(history[-1], corrupt=True)

    def rewritten(self) -> None:
        """The newest checkpoint was rewritten after validation: its kept sums include the
        rewrite (a rollback to it keeps the rewrite)."""
        history = self.kept
        if history and history[-1].step == self.durable_step:
            history[-1] = replace(history[-1], stall_s=self.ledger.checkpoint_stall_s)

    def _restore_oldest(self) -> None:
        """The wanted checkpoint is older than any kept: with every checkpoint since the start
        kept, that is the start; otherwise keep_last deleted it and the oldest kept one is
        used (or, with none left on the tier, the durable point stays where it is)."""
        history = self.kept
        if not self.deleted_any:
            self.restore(START)
            return
        self.ledger.rollback_exhausted += 1
        if history:
            self.restore(history[0])
        else:
            self.drop()

    def fall_back(self) -> None:
        """The newest kept checkpoint failed to load: the previous one, or the start."""
        history = self.kept
        history.pop()
        self.ledger.checkpoints_corrupt += 1
        if history:
            self.restore(history[-1])
        else:  # nothing older is kept: from the start
            if self.deleted_any:
                self.ledger.rollback_exhausted += 1
            self.restore(START)

    def restore(self, entry: Kept) -> None:
        """Roll back to `entry`: the work kept since it is lost, newer checkpoints are gone."""
        self.drop()
        ledger = self.ledger
        unsafe = (
            (ledger.ideal_s - entry.ideal_s)
            + (ledger.slowdown_s - entry.slowdown_s)
            + (ledger.checkpoint_stall_s - entry.stall_s)
        )
        if unsafe <= 0.0 and entry.step == self.durable_step:
            return
        ledger.ideal_s, ledger.slowdown_s = entry.ideal_s, entry.slowdown_s
        ledger.checkpoint_stall_s = entry.stall_s
        ledger.lost_work_s += unsafe
        if self.timeline is not None:
            self._unkeep(unsafe, running=False)
        history = self.kept
        while history and history[-1].step > entry.step:
            history.pop()
        if self.evicted is not None and self.evicted.step >= entry.step:
            self.evicted = None  # not before the restart point: no fallback for it
        self.durable_step = self.resume_step = entry.step
        self.durable_on_backup = entry.on_backup
        self.resets.append((self.env.now, entry.made_s))
        if self.storage is not None:  # copies of the abandoned checkpoints are no fallback
            self.storage.drop_backups_after(entry.step)

    def trace(self, name: str, start_s: float, duration_s: float, **args) -> None:
        record(self.timeline, name, start_s, duration_s, **args)

    # ---- the timeline's open spans (only called when a timeline is kept)

    def _open(self, elapsed_s: float) -> None:
        """The stretch that ends now ran for `elapsed_s`: its time is open until resolved."""
        end = self.env.now
        start = end - elapsed_s
        spans = self.open_spans
        if spans and abs(spans[-1][1] - start) <= SLIVER_S:
            spans[-1][1] = end  # straight on from the previous stretch
        elif end > start:
            spans.append([start, end])

    def _keep_oldest(self, seconds: float, to_step: int, checkpoints: int) -> None:
        """Trace the oldest `seconds` of open work as kept ("train"). Holds may split it into
        several events; the last one counts the `checkpoints` that made it durable."""
        spans, pieces = self.open_spans, []
        while spans and seconds > SLIVER_S:
            start, end = spans[0]
            if end - start <= seconds + SLIVER_S:
                spans.pop(0)
                pieces.append((start, end - start))
                seconds -= end - start
            else:
                pieces.append((start, seconds))
                spans[0][0] = start + seconds
                seconds = 0.0
        for i, (start, duration) in enumerate(pieces, 1):
            if i < len(pieces):
                self.trace("train", start, duration, to_step=to_step)
            else:
                self.trace("train", start, duration, to_step=to_step, checkpoints=checkpoints)

    def _resolve_newest(self, seconds: float, name: str, **args) -> None:
        """Trace the newest `seconds` of open work as `name` (rolled back: "lost work")."""
        spans = self.open_spans
        while spans and seconds > SLIVER_S:
            start, end = spans[-1]
            if end - start <= seconds + SLIVER_S:
                spans.pop()
                self.trace(name, start, end - start, **args)
                seconds -= end - start
            else:
                self.trace(name, end - seconds, seconds, **args)
                spans[-1][1] = end - seconds
                seconds = 0.0

    def _resolve_all(self, name: str, **args) -> None:
        for start, end in self.open_spans:
            self.trace(name, start, end - start, **args)
        self.open_spans = []

    def _unkeep(self, seconds: float, running: bool) -> None:
        """The newest `seconds` of kept work are no longer safe: take them back from the newest
        "train" events; open again (`running`: the job still holds the work) or lost."""
        timeline = self.timeline
        pieces = []
        i = len(timeline) - 1
        while i >= 0 and seconds > SLIVER_S:
            event = timeline[i]
            if event["name"] == "train":
                duration, end = event["duration_s"], event["start_s"] + event["duration_s"]
                if duration <= seconds + SLIVER_S:
                    del timeline[i]
                    take = duration
                else:
                    event["duration_s"] = duration - seconds
                    take = seconds
                pieces.append([end - take, end])
                seconds -= take
            i -= 1
        pieces.reverse()
        if running:
            self.open_spans[:0] = pieces
        else:
            for start, end in pieces:
                self.trace("lost work", start, end - start, rolled_back_to=self.durable_step)

    def keep(self, steps: int, compute_s: float, total_s: float, checkpoints: int) -> None:
        """Steps made durable: their nominal time is ideal, the rest of their compute slowdown,
        and the time spent on their checkpoints (blocking parts, waits for drains) stall."""
        ledger, nominal = self.ledger, self.plan.step_s
        ledger.ideal_s += steps * nominal
        ledger.slowdown_s += excess_s(compute_s, steps * nominal)
        ledger.checkpoint_stall_s += total_s - compute_s
        ledger.checkpoints_written += checkpoints

    def book_durable(self, stretch: Stretch, position, t0: float) -> None:
        """Book what became durable at `position`: the snapshot draining when the stretch
        began, and the stretch's own checkpoints (with the work carried into it)."""
        if self.pending is not None and position.pending_durable:
            p = self.pending
            self.keep(p.steps, p.compute_s, p.compute_s + p.other_s, 1)
            if self.timeline is not None:
                self._keep_oldest(p.compute_s + p.other_s, stretch.start_step, 1)
            self.pending = None
            self.durable_step = stretch.start_step
            if self.kept is not None:
                ledger = self.ledger
                kept = (ledger.ideal_s, ledger.slowdown_s, ledger.checkpoint_stall_s)
                self._remember(stretch.start_step, p.made_s, kept, ledger.checkpoints_written)
            self.durable_on_backup = False  # the durable checkpoint is on the tier again
            self.maybe_backup(self.durable_step, t0 + stretch.pending_drain_s)
        if position.checkpoints:
            ledger = self.ledger
            durable_before = self.durable_step
            base_compute = self.next_compute_s
            base_total = base_compute + self.next_other_s
            history = (self.storage is not None and self.plan.backup_every) or (
                self.kept is not None
            )
            if history:
                before = (
                    ledger.ideal_s,
                    ledger.slowdown_s,
                    ledger.checkpoint_stall_s,
                    ledger.checkpoints_written,
                )
            self.keep_stretch(
                position.durable_step,
                position.kept_compute_s,
                position.kept_s,
                position.checkpoints,
            )
            if history:
                self._stretch_history(
                    stretch, position, t0, before, base_compute, base_total, durable_before
                )
            if self.timeline is not None:  # the carried work and the stretch's kept part
                self._keep_oldest(
                    base_total + position.kept_s, position.durable_step, position.checkpoints
                )

    def keep_stretch(
        self, durable_step: int, kept_compute_s: float, kept_s: float, checkpoints: int
    ) -> None:
        """The stretch's first `checkpoints` checkpoints are durable, up to `durable_step`:
        the work carried into the stretch and its `kept_s` (of which `kept_compute_s`
        compute) are kept; nothing is carried any more."""
        carried_compute = self.next_compute_s
        self.keep(
            durable_step - self.durable_step,
            carried_compute + kept_compute_s,
            carried_compute + self.next_other_s + kept_s,
            checkpoints,
        )
        self.next_compute_s = self.next_other_s = 0.0
        self.durable_step = durable_step
        self.durable_on_backup = False  # the durable checkpoint is on the tier again

    def lose_stretch(self, lost_s: float, checkpoints_lost: int) -> None:
        """The stretch's last `lost_s` and its `checkpoints_lost` snapshots that never became
        durable are lost, and the job rolls back to its last durable checkpoint (`drop`)."""
        ledger = self.ledger
        ledger.lost_work_s += lost_s
        ledger.checkpoints_lost += checkpoints_lost
        self.drop()

    def _stretch_history(
        self,
        stretch: Stretch,
        position,
        t0: float,
        before: tuple[float, float, float, int],
        base_compute: float,
        base_total: float,
        durable_before: int,
    ) -> None:
        """The stretch's durable checkpoints into the backups and the kept history, each with
        the ledger's kept sums as they stood when it became durable (`before`: the sums and
        the checkpoints written before the stretch's; `durable_before`: the durable step)."""
        ledger = self.ledger

        def kept_at(j: int) -> tuple[int, tuple[float, float, float]]:
            """The step of the stretch's checkpoint j and the ledger's kept sums then."""
            step_j = stretch.step_at_checkpoint(j)
            n = step_j - durable_before
            compute_j = base_compute + stretch._kept_compute(j)
            total_j = base_total + stretch.snapshot_end_s(j)
            return step_j, (
                before[0] + n * self.plan.step_s,
                before[1] + excess_s(compute_j, n * self.plan.step_s),
                before[2] + total_j - compute_j,
            )

        if self.storage is not None and self.plan.backup_every:
            for j in range(1, position.checkpoints + 1):
                if self.storage.wants_backup(before[3] + j):
                    step_j, kept = kept_at(j)
                    self.storage.checkpoint_durable(step_j, t0 + stretch.durable_s(j), kept)
        if self.kept is not None:  # only the newest keep_last (and the one before) matter
            first = max(1, position.checkpoints - self.plan.keep_last)
            if first > 1:  # the stretch's older checkpoints are deleted already
                self.deleted_any = True
            for j in range(first, position.checkpoints + 1):
                step_j, kept = kept_at(j)
                if j == position.checkpoints:  # exactly what the ledger holds now
                    kept = (ledger.ideal_s, ledger.slowdown_s, ledger.checkpoint_stall_s)
                self._remember(step_j, t0 + stretch.snapshot_start_s(j), kept, before[3] + j)

    def maybe_backup(self, step: int, durable_s: float) -> None:
        if self.storage is not None and self.storage.wants_backup(self.ledger.checkpoints_written):
            ledger = self.ledger
            self.storage.checkpoint_durable(
                step, durable_s, (ledger.ideal_s, ledger.slowdown_s, ledger.checkpoint_stall_s)
            )

    def book(self, stretch: Stretch, position, elapsed_s: float, memory: bool = False) -> None:
        """The stretch ends at `position`: keep what is durable, lose the rest (roll back).

        With `memory` (a single-node failure and an in-memory level) the job rolls back
        only to its newest in-memory checkpoint: the work up to it is carried, not lost."""
        if self.timeline is not None:
            self._open(elapsed_s)
        self.book_durable(stretch, position, self.env.now - elapsed_s)
        if memory and self.roll_back_to_memory(stretch, position, elapsed_s):
            return
        # the stretch's rest, and its snapshots not durable (a sync write under way too)
        self.lose_stretch(
            elapsed_s - position.kept_s,
            position.snapshots - position.checkpoints + int(position.aborted_write),
        )  # `drop` traces all the open work (the stretch's rest, what was carried) as lost

    def roll_back_to_memory(self, stretch: Stretch, position, elapsed_s: float) -> bool:
        """Carry the work up to the newest in-memory checkpoint of the current window (and the
        not yet durable work it builds on); lose the rest. False if there is none."""
        w = position.snapshots
        if w == stretch.checkpoints and w > position.checkpoints:
            # every snapshot was taken and the last (the run's final one) still drained: no
            # window follows it and the newest in-memory checkpoint is at its step; its
            # window's work is carried (all steps done) and the snapshot is taken again
            _, steps = stretch.window_steps(w)
            compute, other = self._add_last_window(position, w, 0.0, 0.0)
            base = stretch.step_at_checkpoint(w - 1)
            return self._resume_from_memory(compute, other, position.window_s, steps, base)
        newest = stretch.progress(w + 1, position.window_s)[2]
        if newest is None:
            return False
        boundary, when_s = newest
        done, _ = stretch.window_steps(w + 1)
        compute = (boundary - done) * stretch.step_s
        other = when_s - compute
        if w == 0:
            compute += self.next_compute_s
            other += self.next_other_s
            base = stretch.start_step
        else:
            base = stretch.step_at_checkpoint(w)
            if w > position.checkpoints:  # the last snapshot never became durable
                compute, other = self._add_last_window(position, w, compute, other)
        window_start = elapsed_s - position.window_s
        lost_s = elapsed_s - (window_start + when_s)
        return self._resume_from_memory(compute, other, lost_s, boundary, base)

    def _add_last_window(self, position, w: int, compute: float, other: float):
        """The work of the window whose snapshot never became durable (and of the work
        carried into it when it was the stretch's first): needed again; that checkpoint is
        lost."""
        compute += position.last_window_compute_s
        other += position.last_window_s - position.last_window_compute_s
        if w == 1:  # its window began before this stretch
            compute += self.next_compute_s
            other += self.next_other_s
        self.ledger.checkpoints_lost += 1
        return compute, other

    def _resume_from_memory(
        self, compute: float, other: float, lost_s: float, done_steps: float, base: int
    ) -> bool:
        """Restart from an in-memory checkpoint `done_steps` into the window after `base`:
        carry `compute` and `other` (and a draining snapshot's work, which dies with the
        job), lose `lost_s`."""
        if self.pending is not None:  # its drain dies with the job; its work is in memory
            compute += self.pending.compute_s
            other += self.pending.other_s
            self.pending = None
            self.ledger.checkpoints_lost += 1
        self.ledger.lost_work_s += lost_s
        if self.timeline is not None:
            self._resolve_newest(lost_s, "lost work", rolled_back_to=base)
        self.next_compute_s, self.next_other_s = compute, other
        self.done_steps, self.snapped_s = float(done_steps), 0.0
        self.resume_step = base
        self.from_memory = True
        if self.kept is not None:  # the state restarts from the in-memory checkpoint's time
            self.resets.append((self.env.now, self.env.now - lost_s))
        return True

    def drop(self) -> None:
        """Roll back to the last durable checkpoint: carried work and a pending snapshot are lost."""
        lost_s = self.next_compute_s + self.next_other_s
        if self.pending is not None:
            lost_s += self.pending.compute_s + self.pending.other_s
            self.ledger.checkpoints_lost += 1
        self.ledger.lost_work_s += lost_s
        if self.timeline is not None:
            self._resolve_all("lost work", rolled_back_to=self.durable_step)
        self.next_compute_s = self.next_other_s = self.done_steps = self.snapped_s = 0.0
        self.pending = None
        self.resume_step = self.durable_step
        self.from_memory = False
        if self.kept is not None:
            self.resets.append((self.env.now, self.durable_made_s()))

    def carry(self, stretch: Stretch, position, elapsed_s: float) -> None:
        """The step time changes mid-stretch: keep what is durable and carry the rest
        (a snapshot still draining, progress toward the next checkpoint) into a new stretch."""
        first_window = position.snapshots == 0
        if self.timeline is not None:
            self._open(elapsed_s)
        self.book_durable(stretch, position, self.env.now - elapsed_s)
        if position.snapshots > position.checkpoints:  # the last snapshot is still draining
            w = position.snapshots
            other = position.last_window_s - position.last_window_compute_s
            compute = position.last_window_compute_s
            if w == 1:  # its window began before this stretch
                compute += self.next_compute_s
                other += self.next_other_s
            self.pending = PendingSnapshot(
                steps=stretch.step_at_checkpoint(w) - self.durable_step,
                compute_s=compute,
                other_s=other,
                drain_left_s=stretch.durable_s(w) - elapsed_s,
                made_s=self.env.now - elapsed_s + stretch.snapshot_start_s(w),
            )
        elif self.pending is not None and not position.pending_durable:
            self.pending = replace(self.pending, drain_left_s=stretch.pending_drain_s - elapsed_s)
        window_other = position.window_s - position.window_compute_s
        w = position.snapshots
        steps_done = (
            stretch.progress(w + 1, position.window_s)[0] if w < stretch.checkpoints else 0.0
        )
        if first_window:
            self.next_compute_s += position.window_compute_s
            self.next_other_s += window_other
            self.done_steps = steps_done
            self.snapped_s += position.window_snapshot_s
        else:
            self.next_compute_s = position.window_compute_s
            self.next_other_s = window_other
            self.done_steps = steps_done
            self.snapped_s = position.window_snapshot_s
            self.resume_step = stretch.step_at_checkpoint(w)

    def tier_down(self) -> bool:
        return self.storage is not None and not self.storage.up

    def storage_event(self, cause: StorageChanged, running: bool) -> None:
        """The tier went down or came back. Down: a write in flight is aborted and a drain in
        flight never completes; with data loss the fallback becomes the newest backup."""
        if not self.tier_down():
            return
        if self.plan.mode == "sync" and self.snapped_s > 0:
            self.ledger.lost_work_s += self.snapped_s  # the aborted write; it restarts later
            if self.timeline is not None:  # the write is the newest work carried
                self._resolve_newest(self.snapped_s, "lost work", rolled_back_to=self.durable_step)
            self.next_other_s -= self.snapped_s
            self.snapped_s = 0.0
            self.ledger.checkpoints_lost += 1
        if self.pending is not None:
            p = self.pending  # never durable: its work is just work in memory again
            self.next_compute_s += p.compute_s
            self.next_other_s += p.other_s
            self.pending = None
            self.ledger.checkpoints_lost += 1
        if cause.lost_data:
            self.lose_tier_data(running)

    def lose_tier_data(self, running: bool) -> None:
        """The tier's checkpoints are gone: fall back to the newest backup (or the start).
        Work kept since then is no longer safe: carried if training, lost if not."""
        assert self.storage is not None
        backup = self.storage.newest_backup()
        ledger = self.ledger
        ideal, slowdown, stall = backup.kept if backup else (0.0, 0.0, 0.0)
        unsafe_compute = (ledger.ideal_s - ideal) + (ledger.slowdown_s - slowdown)
        unsafe_other = ledger.checkpoint_stall_s - stall
        ledger.ideal_s, ledger.slowdown_s, ledger.checkpoint_stall_s = ideal, slowdown, stall
        self.durable_step = backup.step if backup else 0
        if self.kept is not None:  # the tier's checkpoints are gone: the backup is what is kept
            self.kept.clear()
            self.deleted_any = True
            self.evicted = None
            if backup is not None:  # its state was taken by the time it was durable
                self.kept.append(Kept(backup.step, backup.durable_s, *backup.kept, False, True))
        if self.timeline is not None:
            self._unkeep(unsafe_compute + unsafe_other, running)
        if running:
            self.next_compute_s += unsafe_compute
            self.next_other_s += unsafe_other
        else:
            ledger.lost_work_s += unsafe_compute + unsafe_other
            self.resume_step = backup.step if backup else 0
        self.durable_on_backup = backup is not None
