"""The checkpoint tier as the job sees it: outages, data loss, and backup copies.

A storage failure takes the tier down for its repair time: nothing is written to
or loaded from it meanwhile, so training runs on until its next checkpoint is
due and then waits. With `loses_data` the checkpoints on the tier are gone and
the job's fallback becomes the newest completed backup. Every `every`-th
durable checkpoint is copied to the backup tier in the background, one copy at
a time; copies still running when the tier goes down are lost.
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from sim.engine.events import Failure
from sim.engine.plan import ReplicaPlan
from sim.engine.streams import LazyStreams


@dataclass(frozen=True)
class Backup:
    step: int
    durable_s: float  # when the checkpoint it copies became durable on the tier
    done_s: float  # when the copy completed
    kept: tuple[float, float, float]  # the job's ideal, slowdown, stall seconds up to `step`


class Storage:
    def __init__(self, env: simpy.Environment, plan: ReplicaPlan, repair_rngs: LazyStreams):
        self.env = env
        self.plan = plan
        self.repair_rngs = repair_rngs
        self.up = True
        self.backups: list[Backup] = []
        self.outages: list[list[float]] = []  # [start, end] of each outage (end inf while down)
        self._free_at_s = 0.0
        self.job = None  # set in the build phase

    def wants_backup(self, index: int) -> bool:
        every = self.plan.backup_every
        return bool(every) and index % every == 0

    def checkpoint_durable(
        self, step: int, durable_s: float, kept: tuple[float, float, float]
    ) -> None:
        """A checkpoint chosen for backup became durable: queue its copy, one at a time.

        The job books checkpoints lazily (when something interrupts it), so copies are
        judged against the outages recorded meanwhile: a copy cannot start while the
        tier is down, and one the tier goes down during is lost.
        """
        start = max(durable_s, self._free_at_s)
        for down, up in self.outages:
            if down <= start < up:
                start = up
        if start == float("inf"):
            return
        done = start + self.plan.backup_copy_s
        for down, _ in self.outages:
            if start < down < done:
                self._free_at_s = down
                return
        self._free_at_s = done
        self.backups.append(Backup(step, durable_s, done, kept))

    def drop_backups_after(self, step: int) -> None:
        """The job rolled back to `step`: copies of later checkpoints hold abandoned state."""
        if self.backups and self.backups[-1].step > step:
            self.backups = [backup for backup in self.backups if backup.step <= step]

    def newest_backup(self) -> Backup | None:
        now = self.env.now
        for backup in reversed(self.backups):
            if backup.done_s <= now:
                return backup
        return None

    def strike(self, failure: Failure) -> None:
        job = self.job
        now = self.env.now
        # copies reading from the tier stop with it
        self.backups = [b for b in self.backups if b.done_s <= now]
        self._free_at_s = min(self._free_at_s, now)
        self.up = False
        outage = [now, float("inf")]
        self.outages.append(outage)
        duration = failure.repair_s
        if duration is None:
            duration = self.repair_rngs[failure.class_index].exponential(failure.repair_mean_s)
        self.env.process(self._repair(duration, outage))
        job.storage_changed(lost_data=failure.loses_data)

    def _repair(self, duration_s: float, outage: list[float]):
        yield self.env.timeout(duration_s)
        outage[1] = self.env.now
        self.up = not any(end == float("inf") for _, end in self.outages)
        if self.up:
            self.job.storage_changed(lost_data=False)

    def backup_lag_hours(self, wall_s: float) -> float:
        """Time-average over the run of the age of the newest completed backup (its
        checkpoint's durable time to now); before the first one, the age since the start."""
        if wall_s <= 0:
            return 0.0
        area, since, source = 0.0, 0.0, 0.0
        for backup in (b for b in self.backups if b.done_s <= wall_s):
            area += _age_area(since, backup.done_s, source)
            since, source = backup.done_s, backup.durable_s
        area += _age_area(since, wall_s, source)
        return area / wall_s / 3600.0


def _age_area(start_s: float, end_s: float, source_s: float) -> float:
    """∫ (t − source) dt over [start, end]."""
    return (end_s - start_s) * ((start_s + end_s) / 2.0 - source_s)
