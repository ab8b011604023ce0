"""Storage outages, data loss and backups on the tiny scenario (sync checkpoints durable at
110, 220, 330, ... s; write 10 s, load 5 s). Backups: every 3rd checkpoint to an object
tier, a 10 s copy and a 5 s restore."""

from __future__ import annotations

import pytest

from sim.engine import Failure, build_plan, simulate_replica
from tests.conftest import identity_error, tiny

CLASSES = [
    {"name": "crash", "scope": "job", "mtbf_hours": 1e15, "detect_minutes": 1},
    {"name": "lustre", "scope": "storage", "mtbf_hours": 1e15, "repair_hours": 1},
]
BACKUP = {"kind": "object", "write_GB_s": 1.0, "read_GB_s": 2.0, "latency_ms": 0, "every": 3}


def plan(backup=BACKUP):
    storage = {"backup": backup} if backup else {}
    return build_plan(tiny(failures=CLASSES, storage=storage))


def crash(t: float) -> Failure:
    return Failure(0, "crash", t, (), 60.0, False, 0.0)


def outage(t: float, repair_s: float, loses_data: bool = False) -> Failure:
    return Failure(
        1,
        "lustre",
        t,
        (),
        0.0,
        False,
        3600.0,
        scope="storage",
        repair_s=repair_s,
        loses_data=loses_data,
    )


def test_training_runs_on_until_the_next_checkpoint_then_waits_for_the_tier():
    # down from 250 s to 450 s: the checkpoint due at 320 s waits until 450 s
    r = simulate_replica(plan(), 0, 1, injected=[outage(250.0, 200.0)])
    assert r.failures == 1 and r.restarts == 0
    assert r.lost_work_hours == 0
    assert r.downtime_hours * 3600 == pytest.approx(130.0)
    assert r.wall_hours * 3600 == pytest.approx(1100 + 130)
    assert identity_error(r) < 1e-9


def test_an_outage_aborts_a_write_in_flight():
    # down at 325 s, half-way through the write of 320-330 s; back at 400 s, written 400-410 s
    r = simulate_replica(plan(), 0, 1, injected=[outage(325.0, 75.0)])
    assert r.checkpoints_lost == 1
    assert r.lost_work_hours * 3600 == pytest.approx(5.0)
    assert r.wall_hours * 3600 == pytest.approx(1100 + 5 + 75)
    assert identity_error(r) < 1e-9


def test_data_loss_restores_from_the_backup_and_loses_work_back_to_its_age():
    # the tier holds step 400 (durable at 440 s); the newest backup is step 300 (copied 330-340 s).
    # The data goes at 500 s; a crash at 530 s, before the next checkpoint, rolls back to step 300.
    r = simulate_replica(
        plan(), 0, 1, injected=[outage(500.0, 20.0, loses_data=True), crash(530.0)]
    )
    assert r.restores_from_backup == 1
    assert r.lost_work_hours * 3600 == pytest.approx(110 + 90)  # steps 300-400 and the 90 s since
    assert r.downtime_hours * 3600 == pytest.approx(60 + 600 + 5)  # restore from the backup: 5 s
    assert identity_error(r) < 1e-9
    # without the data loss the same crash loses only the 90 s since step 400
    kept = simulate_replica(plan(), 0, 1, injected=[outage(500.0, 20.0), crash(530.0)])
    assert kept.lost_work_hours * 3600 == pytest.approx(90.0) and kept.restores_from_backup == 0


def test_data_loss_without_a_backup_starts_over():
    r = simulate_replica(
        plan(backup=None), 0, 1, injected=[outage(500.0, 20.0, loses_data=True), crash(530.0)]
    )
    assert r.lost_work_hours * 3600 == pytest.approx(530.0)
    assert r.downtime_hours * 3600 == pytest.approx(60 + 600)  # nothing to load
    assert identity_error(r) < 1e-9


def test_a_new_checkpoint_after_the_repair_makes_the_work_safe_again():
    r = simulate_replica(
        plan(), 0, 1, injected=[outage(500.0, 20.0, loses_data=True), crash(600.0)]
    )
    # checkpoint 5 was durable on the repaired tier at 550 s: the crash at 600 s loses 50 s
    assert r.lost_work_hours * 3600 == pytest.approx(50.0) and r.restores_from_backup == 0


def test_backup_lag_is_the_time_average_age_of_the_newest_backup():
    r = simulate_replica(plan(backup={**BACKUP, "every": 2}), 0, 1)
    # backups done at 230, 450, 670, 890 s of checkpoints durable at 220, 440, 660, 880 s
    area = 230**2 / 2 + 3 * 220 * 120 + 210 * ((890 + 1100) / 2 - 880)
    assert r.backup_lag_hours == pytest.approx(area / 1100 / 3600)
    assert r.checkpoint_GB_written == pytest.approx(10 * 10.0)
    assert r.storage_peak_TB == pytest.approx(6 * 10.0 / 1e3)  # keep_last 5 + the one being written
