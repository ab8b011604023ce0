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


def test_nodes_back_together_from_a_leaf_switch_repair_join_the_waiting_job_together():
    from sim.engine import simulate_replica
    from tests.conftest import identity_error
    from tests.engine.test_fabric_failures import FABRIC, fabric_plan

    plan = fabric_plan(
        cluster={**FABRIC["cluster"], "spare_nodes": 0},
        recovery={"policy": "elastic", "restart_minutes": 1, "elastic_min_fraction": 0.6},
    )
    leaf = Failure(1, "switch", 80.0, (), 60.0, True, 150.0, scope="switch", component=0)
    r = simulate_replica(plan, 0, 1, injected=[leaf], timeline=True)
    # the leaf takes 4 of the 8 nodes out: too few to run (60%), the job waits for them; they
    # come back together with the switch, and the job restarts on all 8 (when it reacted to
    # the first one back, it restarted on 5 and paid a rescale to grow to 8 later)
    waits = [e for e in r.timeline if e["name"] == "wait for nodes"]
    restarts = [e for e in r.timeline if e["name"] == "restart"]
    assert len(waits) == 1 and [e["nodes"] for e in restarts] == [8]
    assert r.rescale_hours == 0 and identity_error(r) < 1e-9
