"""Gray failures and data faults with injected events and exact answers: loss spikes that
roll back past the newest checkpoint, silent data corruption, corrupt checkpoints (found
at a load, or by validation), stragglers, and failures that wait for the on-call engineer.

The tiny scenario: 1,000 steps of 1 s, a sync checkpoint every 100 steps that takes
10 s to write and 5 s to read back, a restart of 600 s (plus the load). Checkpoint k
(step 100k) is taken at 110k − 10 s and durable at 110k s.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

from sim.engine import Failure, StragglerOnset, build_plan, simulate_replica
from sim.engine.progress import Progress
from sim.model.scenario_set import ScenarioError
from tests.conftest import TINY, identity_error, timeline_problems, tiny

WRITE_S, LOAD_S, RESTART_S, DETECT_S = 10.0, 5.0, 600.0, 60.0
IDEAL_S = 1000.0
NEVER = 1e15


def klass(**keys) -> dict:
    return {"name": "spike", "scope": "job", "mtbf_hours": NEVER, "detect_minutes": 1, **keys}


def strike(t: float, detect_s: float = DETECT_S, index: int = 0, name: str = "spike") -> Failure:
    return Failure(index, name, t, (), detect_s, False, 0.0)


def run(injected, **changes):
    r = simulate_replica(build_plan(tiny(**changes)), 0, 1, injected=injected, timeline=True)
    assert r.finished
    assert identity_error(r) < 1e-9
    assert timeline_problems(r) == []
    return r


def no_failure_wall_s(**changes) -> float:
    return run([], **changes).wall_hours * 3600


# ---- loss spikes: rollback_checkpoints


def test_a_loss_spike_rolling_back_two_checkpoints_loses_the_work_since_the_second_newest():
    # at 350 s checkpoints 1-3 (steps 100-300) are durable; the newest is step 300
    newest = run([strike(350.0)], failures=[klass(rollback_checkpoints=1)])
    second = run([strike(350.0)], failures=[klass(rollback_checkpoints=2)])
    assert newest.lost_work_hours * 3600 == pytest.approx(350 - 330)
    # back to step 200 (durable at 220): the 110 s of checkpoint 3's cycle are lost too
    assert second.lost_work_hours * 3600 == pytest.approx(350 - 220)
    assert second.wall_hours * 3600 == pytest.approx(newest.wall_hours * 3600 + 110.0)
    assert (second.rollbacks_beyond_newest, second.rollback_exhausted) == (1, 0)
    assert newest.rollbacks_beyond_newest == 0


def test_a_rollback_past_what_keep_last_kept_restarts_from_the_oldest_kept_one():
    # keep_last 1: only step 300 is kept; it is where the run restarts (and says so)
    r = run(
        [strike(350.0)],
        failures=[klass(rollback_checkpoints=3)],
        checkpoint={"interval_steps": 100, "state_bytes_per_param": 10, "keep_last": 1},
    )
    assert r.lost_work_hours * 3600 == pytest.approx(350 - 330)
    # it wanted to go back, but nothing older is kept: it restarts from the newest
    assert (r.rollbacks_beyond_newest, r.rollback_exhausted) == (0, 1)
    # keep_last 2 keeps steps 200 and 300: rolling back 3 ends at step 200, also exhausted
    r = run(
        [strike(350.0)],
        failures=[klass(rollback_checkpoints=3)],
        checkpoint={"interval_steps": 100, "state_bytes_per_param": 10, "keep_last": 2},
    )
    assert r.lost_work_hours * 3600 == pytest.approx(350 - 220)
    assert r.rollback_exhausted == 1


def test_a_rollback_beyond_the_first_checkpoint_restarts_from_the_start():
    # only checkpoint 1 exists (nothing deleted): rolling back 2 goes to step 0, no load
    r = run([strike(150.0)], failures=[klass(rollback_checkpoints=2)])
    assert r.lost_work_hours * 3600 == pytest.approx(150.0)
    assert r.rollback_exhausted == 0
    assert r.checkpoint_load_hours == 0.0


# ---- silent data corruption


def test_silent_corruption_loses_the_work_since_the_last_checkpoint_before_it():
    # corrupted at 150 s (after checkpoint 1 was taken at 100 s), noticed 300 s later at
    # 450 s: checkpoints 2-4 (taken at 210, 320, 430 s) hold corrupt state
    sdc = klass(name="sdc", silent=True, detect_minutes=5)
    r = run([strike(150.0, detect_s=300.0, name="sdc")], failures=[sdc])
    assert r.lost_work_hours * 3600 == pytest.approx(450 - 110)
    assert r.detect_hours == 0.0  # the job ran on meanwhile: no downtime until it was found
    assert r.failures == 1 and r.rollbacks_beyond_newest == 1
    # the same failure noticed at once is an ordinary crash
    loud = run([strike(450.0, detect_s=0.0, name="sdc")], failures=[klass(name="sdc")])
    assert loud.lost_work_hours * 3600 == pytest.approx(450 - 440)
    assert r.wall_hours * 3600 == pytest.approx(loud.wall_hours * 3600 + 330.0)


def test_silent_corruption_class_takes_detect_hours():
    sdc = {"name": "sdc", "scope": "job", "mtbf_hours": NEVER, "silent": True, "detect_hours": 6}
    assert build_plan(tiny(failures=[sdc])).failure_classes[0].detect_s == 6 * 3600
    with pytest.raises(ScenarioError, match=r"failures\.0\.detect_hours"):
        tiny(failures=[{**sdc, "detect_minutes": 5}])
    with pytest.raises(ScenarioError, match=r"failures\.0\.silent"):
        tiny(failures=[{**sdc, "scope": "link"}])


# ---- corrupt checkpoints


def corrupt_only(*indices):
    """Make exactly the checkpoints written `indices`-th corrupt (the random draw replaced)."""
    return mock.patch.object(
        Progress,
        "corrupt_flags",
        lambda self, first, last: np.isin(np.arange(first, last + 1), indices),
    )


def test_a_corrupt_newest_checkpoint_costs_one_read_and_the_rollback_to_the_previous():
    checkpoint = {"interval_steps": 100, "state_bytes_per_param": 10, "corrupt_prob": 0.01}
    clean = run([strike(350.0)], failures=[klass()], checkpoint=checkpoint)
    with corrupt_only(3):
        bad = run([strike(350.0)], failures=[klass()], checkpoint=checkpoint)
    assert bad.checkpoints_corrupt == 1
    # one failed read of 5 s, and checkpoint 3's 110 s redone
    assert bad.checkpoint_load_hours * 3600 == pytest.approx(
        clean.checkpoint_load_hours * 3600 + LOAD_S
    )
    assert bad.lost_work_hours * 3600 == pytest.approx(clean.lost_work_hours * 3600 + 110.0)
    assert bad.wall_hours * 3600 == pytest.approx(clean.wall_hours * 3600 + LOAD_S + 110.0)
    # an older corrupt checkpoint is never loaded: it costs nothing
    with corrupt_only(2):
        older = run([strike(350.0)], failures=[klass()], checkpoint=checkpoint)
    assert older.wall_hours == pytest.approx(clean.wall_hours)


def test_validation_reads_every_checkpoint_back_and_rewrites_a_corrupt_one():
    base = {"interval_steps": 100, "state_bytes_per_param": 10, "corrupt_prob": 0.01}
    plain = no_failure_wall_s(checkpoint=base)
    with corrupt_only(3):
        validated = run([], checkpoint={**base, "validate": True})
        # a failure after it: the rewritten checkpoint loads, nothing corrupt is found later
        struck = run([strike(400.0)], failures=[klass()], checkpoint={**base, "validate": True})
    # 10 checkpoints, each read back (5 s); checkpoint 3 written and read again (15 s)
    assert validated.wall_hours * 3600 == pytest.approx(plain + 10 * LOAD_S + WRITE_S + LOAD_S)
    assert validated.checkpoint_stall_hours * 3600 == pytest.approx(10 * 15.0 + 15.0)
    assert validated.checkpoints_corrupt == 1 and validated.checkpoints_written == 10
    assert struck.checkpoints_corrupt == 1 and struck.rollbacks_beyond_newest == 0


# ---- on-call hours


def oncall_run(weekday: str, hour: float, t: float):
    cls = klass(name="hang", needs_human=True, detect_minutes=0)
    return run(
        [strike(t, detect_s=0.0, name="hang")],
        failures=[cls],
        oncall={
            "response_minutes": 15,
            "night_response_minutes": 60,
            "weekend_response_minutes": 120,
        },
        simulation={
            "replicas": 10,
            "seed": 1,
            "horizon_days": 30,
            "start_weekday": weekday,
            "start_hour": hour,
        },
    )


def test_a_failure_at_23h_on_a_saturday_waits_the_weekend_response():
    r = oncall_run("saturday", 22.75, 900.0)  # noticed at 23:00 on Saturday
    assert r.human_wait_hours == pytest.approx(2.0)
    plain = run(
        [strike(900.0, detect_s=0.0, name="hang")], failures=[klass(name="hang", detect_minutes=0)]
    )
    assert r.wall_hours == pytest.approx(plain.wall_hours + 2.0)
    assert r.downtime_hours == pytest.approx(plain.downtime_hours + 2.0)


def test_on_call_response_follows_the_weekly_calendar():
    assert oncall_run("tuesday", 10.0, 100.0).human_wait_hours == pytest.approx(
        0.25
    )  # working hours
    assert oncall_run("tuesday", 22.0, 100.0).human_wait_hours == pytest.approx(1.0)  # night
    assert oncall_run("sunday", 10.0, 100.0).human_wait_hours == pytest.approx(2.0)  # weekend
    # Friday 17:59 + 2 min: after the working day
    assert oncall_run("friday", 17.0 + 59 / 60, 120.0).human_wait_hours == pytest.approx(1.0)


def test_needs_human_without_an_oncall_section_is_refused():
    with pytest.raises(ScenarioError, match=r"failures\.0\.needs_human"):
        tiny(failures=[klass(needs_human=True)])


# ---- stragglers


def slow(detect_hours=None, **keys) -> dict:
    """A stragglers section that never strikes by itself (tests inject the onsets)."""
    return {"rate_per_1k_gpu_day": 1e-9, "slowdown": 0.3, "detect_hours": detect_hours, **keys}


def long_run() -> dict:
    """10,000 steps of 1 s and no checkpoint before the end, stragglers only injected."""
    return dict(
        model={
            "params": 1.0e9,
            "tokens": 1.0e7,
            "global_batch_tokens": 1000,
            "flops_per_token": 6.0e9,
        },
        checkpoint={"interval_steps": 100_000, "state_bytes_per_param": 10},
        stragglers=slow(),
    )


def test_a_straggler_of_factor_1_5_over_2_h_of_work_adds_exactly_1_h_of_slowdown():
    # a long run (10,000 steps of 1 s, no checkpoint before the end): a straggler that makes
    # the job 1.5x slower (slowdown 1/3) from 1,000 s until it clears 3 h later computes
    # 2 h of nominal work in those 3 h: exactly 1 h of slowdown
    changes = long_run()
    onset = StragglerOnset(1000.0, slot=1, slowdown=1 / 3, clear_s=3 * 3600.0)
    r = run([onset], **changes)
    plain = run([], **changes)
    assert r.slowdown_hours == pytest.approx(1.0)
    assert r.wall_hours == pytest.approx(plain.wall_hours + 1.0)
    assert (r.stragglers, r.straggler_hours) == (1, pytest.approx(3.0))


def test_several_stragglers_the_slowest_counts():
    changes = long_run()
    both = run(
        [
            StragglerOnset(1000.0, slot=0, slowdown=0.5, clear_s=3600.0),
            StragglerOnset(1000.0, slot=1, slowdown=0.2, clear_s=3600.0),
        ],
        **changes,
    )
    # an hour at 2x: 0.5 h of work done, 0.5 h of slowdown (the 0.2 one hides behind it)
    assert both.slowdown_hours == pytest.approx(0.5)
    assert both.straggler_hours == pytest.approx(1.0)


def with_a_spare() -> dict:
    """The tiny run with a spare node and stragglers detected after a minute."""
    cluster = {"gpu": {"name": "test", "peak_tflops": 2.0}, "nodes": 2, "gpus_per_node": 2}
    return dict(cluster={**cluster, "spare_nodes": 1}, stragglers=slow(detect_hours=1 / 60))


def test_a_detected_straggler_is_drained_at_the_next_checkpoint():
    # slowdown 0.5 (2x) from 150 s (step 140), detected 1 min later at 210 s; the next
    # checkpoint (step 200) is durable at 150 + 60*2 + 10 = 280 s: the node is drained there,
    # a spare takes its place and the job restarts (600 s + the 5 s load), nothing is lost
    changes = with_a_spare()
    r = run([StragglerOnset(150.0, slot=0, slowdown=0.5)], **changes)
    assert r.slowdown_hours * 3600 == pytest.approx(60.0)
    assert r.straggler_hours * 3600 == pytest.approx(130.0)
    assert r.nodes_drained == 1 and r.nodes_replaced == 1 and r.lost_work_hours == 0
    assert r.downtime_hours * 3600 == pytest.approx(RESTART_S + LOAD_S)
    # never detected: it drags the job to the end (860 steps at 2x after step 140)
    never = run([StragglerOnset(150.0, slot=0, slowdown=0.5)], **{**changes, "stragglers": slow()})
    assert never.slowdown_hours * 3600 == pytest.approx(860.0)
    assert never.nodes_drained == 0
    # below the detector's threshold it is never caught either
    blind = run(
        [StragglerOnset(150.0, slot=0, slowdown=0.5)],
        **{**changes, "stragglers": slow(detect_hours=1 / 60, detect_threshold=0.6)},
    )
    assert blind.slowdown_hours == pytest.approx(never.slowdown_hours)


# ---- regressions: rollbacks that meet other recoveries


SDC = {"name": "sdc", "scope": "job", "mtbf_hours": NEVER, "silent": True, "detect_hours": 1}
NODE = {
    "name": "node",
    "scope": "node",
    "mtbf_hours": NEVER,
    "detect_minutes": 1,
    "repair_hours": 1,
}
# the checkpoint tier, losing its checkpoints when it fails (tests inject the outage)
TIER = {
    "name": "tier",
    "scope": "storage",
    "mtbf_hours": NEVER,
    "repair_hours": 1,
    "loses_data": True,
}


def sdc(t: float, found_after_s: float) -> Failure:
    return Failure(0, "sdc", t, (), found_after_s, False, 0.0)


def test_silent_corruption_found_while_the_job_waits_for_nodes_still_rolls_back():
    node_failure = Failure(1, "node", 500.0, (0,), 60.0, True, 3600.0, scope="node")
    alone = run([node_failure], failures=[SDC, NODE])
    both = run([sdc(150.0, 600.0), node_failure], failures=[SDC, NODE])
    # found at 750 s, during the wait for a repaired node: back to step 100 (durable at
    # 110 s, taken before the corruption), so the kept checkpoints 2-4 (330 s) are lost too
    assert alone.lost_work_hours * 3600 == pytest.approx(500 - 440)
    assert both.lost_work_hours * 3600 == pytest.approx(500 - 440 + 330)
    assert both.rollbacks_beyond_newest == 1


def test_silent_corruption_a_recovery_already_undid_is_not_found_again():
    crash = klass(name="crash")
    # the crash at 200 s restarts from step 100 (taken at 100 s, before the corruption at
    # 150 s): the corrupt state is gone, and its late "detection" finds nothing
    plain = run([strike(200.0, index=1, name="crash")], failures=[SDC, crash])
    both = run([sdc(150.0, 1500.0), strike(200.0, index=1, name="crash")], failures=[SDC, crash])
    assert both.lost_work_hours == pytest.approx(plain.lost_work_hours)
    assert both.wall_hours == pytest.approx(plain.wall_hours)
    assert both.rollbacks_beyond_newest == 0 and both.failures == 2


def test_silent_corruption_past_what_keep_last_kept_restarts_from_the_start():
    # every kept checkpoint was taken after the corruption: none is clean
    r = run(
        [sdc(150.0, 500.0)],
        failures=[SDC],
        checkpoint={"interval_steps": 100, "state_bytes_per_param": 10, "keep_last": 2},
    )
    assert r.lost_work_hours * 3600 == pytest.approx(650.0)
    assert (r.rollbacks_beyond_newest, r.rollback_exhausted) == (1, 1)


@pytest.mark.parametrize("keep_last", [1, 5])
def test_a_failure_during_a_rewrite_rolls_back_past_the_corrupt_checkpoint(keep_last):
    # the previous checkpoint is deleted only once the new one is validated: even keep_last 1
    # can fall back to it
    base = {
        "interval_steps": 100,
        "state_bytes_per_param": 10,
        "corrupt_prob": 0.01,
        "validate": True,
        "keep_last": keep_last,
    }
    with corrupt_only(3):
        # checkpoint 3 (step 300) is written and read back by 345 s, found corrupt, and its
        # rewrite (15 s) is cut short at 352 s: the restart is from step 200 (durable at 230 s)
        r = run([strike(352.0)], failures=[klass()], checkpoint=base)
    assert r.lost_work_hours * 3600 == pytest.approx(352 - 230)
    assert r.checkpoints_corrupt == 1


def test_a_straggler_that_clears_before_its_drain_is_not_drained():
    changes = with_a_spare()
    # detected at 210 s, cleared at 220 s, before the checkpoint at 280 s
    r = run([StragglerOnset(150.0, slot=0, slowdown=0.5, clear_s=70.0)], **changes)
    assert r.nodes_drained == 0 and r.restarts == 0
    assert r.straggler_hours * 3600 == pytest.approx(70.0)


def test_loss_spikes_merged_into_one_recovery_roll_back_once():
    spike = klass(rollback_checkpoints=2)
    one = run([strike(560.0)], failures=[spike])
    two = run([strike(560.0), strike(565.0)], failures=[spike])  # the second during detection
    assert two.lost_work_hours == pytest.approx(one.lost_work_hours)
    assert two.rollbacks_beyond_newest == one.rollbacks_beyond_newest == 1


def test_silent_corruption_while_the_job_is_down_corrupts_nothing():
    node_failure = Failure(1, "node", 200.0, (0,), 60.0, True, 3600.0, scope="node")
    plain = run([node_failure], failures=[SDC, NODE])
    wait = next(e for e in plain.timeline if e["name"] == "wait for nodes")
    during = wait["start_s"] + wait["duration_s"] / 2  # no training state on the GPUs
    both = run([node_failure, sdc(during, 3943.0)], failures=[SDC, NODE])
    assert both.wall_hours == pytest.approx(plain.wall_hours)
    assert both.failures == plain.failures  # it struck nothing


def test_silent_corruption_undone_by_an_in_memory_restart_is_not_found_again():
    # in-memory checkpoints every 10 steps: a node crash at 157 s restarts from the one taken
    # at ~151 s, before the corruption at 153 s; its detection later finds nothing
    changes = dict(
        failures=[SDC, NODE],
        checkpoint={"interval_steps": 100, "state_bytes_per_param": 10, "memory_every_steps": 10},
        cluster={
            "gpu": {"name": "test", "peak_tflops": 2.0},
            "nodes": 2,
            "gpus_per_node": 2,
            "spare_nodes": 1,
        },
    )
    crash = Failure(1, "node", 157.0, (0,), 60.0, True, 3600.0, scope="node")
    plain = run([crash], **changes)
    both = run([sdc(153.0, 600.0), crash], **changes)
    assert both.wall_hours == pytest.approx(plain.wall_hours)
    assert both.rollbacks_beyond_newest == 0


def test_silent_corruption_after_the_tier_lost_its_data_goes_back_to_the_backup():
    changes = dict(
        failures=[SDC, TIER],
        storage={
            **TINY["storage"],
            "backup": {"kind": "object", "write_GB_s": 100.0, "read_GB_s": 100.0, "every": 1},
        },
    )
    loss = Failure(
        1, "tier", 700.0, (), 60.0, False, 0.0, scope="storage", repair_s=60.0, loses_data=True
    )
    r = run([loss, sdc(705.0, 300.0)], **changes)
    # the newest backup taken before the corruption (step 600, durable at 660 s) is where
    # the run restarts from, read back from the backup tier; not the start
    assert r.restores_from_backup == 1 and r.rollback_exhausted == 0
    assert r.lost_work_hours * 3600 < 400


def test_the_tier_lost_during_a_rewrite_keeps_the_timeline_and_the_record_in_step():
    base = {
        "interval_steps": 100,
        "state_bytes_per_param": 10,
        "corrupt_prob": 0.01,
        "validate": True,
    }
    loss = Failure(
        0, "tier", 352.0, (), 60.0, False, 0.0, scope="storage", repair_s=600.0, loses_data=True
    )
    with corrupt_only(3):
        r = run([loss], failures=[TIER], checkpoint=base)  # run() checks the timeline
    assert r.checkpoints_corrupt == 1
