"""Recoveries the random soaks found: each one a deterministic replica."""

from __future__ import annotations

from sim.engine import Failure
from tests.engine.test_gray import TIER, corrupt_only, klass, run, strike


def test_the_tier_lost_while_a_restart_reads_a_corrupt_checkpoint_restarts_from_the_fallback():
    checkpoint = {"interval_steps": 100, "state_bytes_per_param": 10, "corrupt_prob": 0.01}
    # the crash at 350 s is noticed at 410 s; the restart first reads checkpoint 3 (corrupt,
    # 5 s); the tier goes down with its data at 412 s, during that read: no checkpoint is
    # left (no backup), so the restart starts over from the start
    loss = Failure(
        1, "tier", 412.0, (), 60.0, False, 0.0, scope="storage", repair_s=60.0, loses_data=True
    )
    with corrupt_only(3):
        r = run([strike(350.0), loss], failures=[klass(), TIER], checkpoint=checkpoint)
    assert r.checkpoints_corrupt == 0  # the read was cut short by the loss: never found
    assert r.restarts == 1 and r.restores_from_backup == 0
