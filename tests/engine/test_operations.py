"""Operations with exact answers: node identities through repair, retirement, pools,
maintenance, misdiagnosis, health checks and classes that spare idle nodes.

The tiny scenario (tests/conftest.py): 1 s steps, 1,000 steps, a 10 s checkpoint every
100 steps (durable at 110, 220, ... s), restart 600 s + 5 s load, detection 60 s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import pytest

from sim.engine import Failure, build_plan, simulate, simulate_replica
from sim.engine.cluster import Cluster
from sim.model.scenario import load_document
from sim.model.scenario_set import ScenarioError
from tests.conftest import TINY, identity_error, merge, tiny

NODE_NEVER = [
    {"name": "node", "scope": "node", "mtbf_hours": 1e15, "detect_minutes": 1, "repair_hours": 1}
]
BASE_WALL_S = 1100.0  # no failures: 1,000 steps + 10 checkpoints of 10 s
RECOVERY_S = 60.0 + 600.0 + 5.0  # detection, restart, load


def node_failure(t: float, slot: int = 0) -> Failure:
    return Failure(0, "node", t, (slot,), 60.0, True, 3600.0, scope="node")


@contextlib.contextmanager
def clusters() -> Iterator[list[Cluster]]:
    """The Cluster objects replicas build, to look at their nodes afterwards."""
    made: list[Cluster] = []

    class Kept(Cluster):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    with mock.patch.object(simulate, "Cluster", Kept):
        yield made


def run(injected=(), **changes):
    with clusters() as made:
        record = simulate_replica(build_plan(tiny(**changes)), 0, 1, injected=list(injected))
    assert identity_error(record) < 1e-9
    return record, made[0]


def repair(**keys):
    return {"auto_minutes": 1, "escalate_prob": 0.0, "auto_false_fix_prob": 0.0, **keys}


def lasting(fault_prob: float) -> list[dict]:
    """NODE_NEVER whose failures come from a lasting fault with probability `fault_prob`."""
    return [dict(NODE_NEVER[0], fault_prob=fault_prob)]


@pytest.mark.parametrize(
    ("fault_prob", "false_fix", "faulty"),
    [(1.0, 1.0, True), (1.0, 0.0, False), (0.0, 1.0, False), (0.0, 0.0, False)],
)
def test_a_false_fix_returns_the_same_node_with_the_fault_it_had(fault_prob, false_fix, faulty):
    # a false fix keeps a lasting fault; a node whose failure was transient (fault_prob 0)
    # comes back healthy whatever the repair's outcome (it used to come back faulty)
    r, cluster = run(
        [node_failure(250.0)],
        failures=lasting(fault_prob),
        cluster={"spare_nodes": 1},
        repair=repair(auto_false_fix_prob=false_fix),
    )
    # node 0 failed in slot 0; spare node 2 took its place; node 0 came back to the spares
    assert cluster.slot_node == [2, 1] and list(cluster.warm) == [0]
    assert bool(cluster.faulty[0]) is faulty and not cluster.lemon.any()
    assert r.nodes_replaced == 1 and r.failures == 1


def leaf_switch_failure(t: float, slot: int = 0, repair_s: float = 100.0) -> Failure:
    """A leaf switch over `slot`'s node, as FabricState.strike makes it (repair_s set)."""
    return Failure(1, "sw", t, (slot,), 60.0, True, 3600.0, scope="switch", repair_s=repair_s)


SWITCH = {"name": "sw", "scope": "job", "mtbf_hours": 1e15, "detect_minutes": 1}


@pytest.mark.parametrize("how", ["left_faulty", "lemon"])
def test_a_leaf_switch_repair_returns_its_nodes_as_they_left(how):
    # node 0 has a lasting fault (a `replace: false` failure left it one, or every node
    # started a lemon); a leaf switch over it sends it away with the switch's repair: it
    # comes back (to the spares) still faulty, as the switch's repair mends nothing of its own
    if how == "left_faulty":
        classes = [dict(NODE_NEVER[0], name="bad", fault_prob=1.0, replace=False), SWITCH]
        injected = [Failure(0, "bad", 250.0, (0,), 60.0, False, 3600.0, scope="node")]
        cluster = {"spare_nodes": 1}
        faulty = [True, False, False]
    else:
        classes = [dict(NODE_NEVER[0], name="bad"), SWITCH]
        injected = []
        cluster = {"spare_nodes": 1, "lemon_fraction": 0.9}  # round(0.9 * 3): all 3 nodes
        faulty = [True, True, True]
    r, made = run([*injected, leaf_switch_failure(500.0)], failures=classes, cluster=cluster)
    assert made.slot_node == [2, 1] and list(made.warm) == [0]
    assert r.nodes_replaced == 1 and made.in_repair == 0
    assert made.faulty.tolist() == faulty


def test_a_faulty_node_fails_more_often_until_a_true_fix():
    plan = build_plan(
        tiny(
            failures=NODE_NEVER,
            cluster={"lemon_fraction": 0.5, "lemon_rate_multiplier": 4.0},
        )
    )
    with clusters() as made:
        simulate_replica(plan, 0, 3)
    cluster = made[0]
    assert cluster.lemon.sum() == 1  # half of the 2 nodes
    lemon_slot = int(cluster.lemon.argmax())
    assert cluster.slot_scale.tolist()[lemon_slot] == 0.25
    assert cluster.slot_scale.tolist()[1 - lemon_slot] == 1.0


def test_a_retired_node_never_returns_and_the_guard_keeps_the_job_whole():
    failures = [node_failure(250.0), node_failure(1000.0), node_failure(1600.0)]
    r, cluster = run(
        failures,
        failures=NODE_NEVER,
        cluster={"spare_nodes": 2},
        repair=repair(retire_after_failures=1, retire_window_days=1),
        simulation={"horizon_days": 1},
    )
    # fleet of 4 for a job of 2: two retire; the third would leave fewer than the job needs
    assert r.nodes_retired == 2 and cluster.retired == 2
    retired = {0, 2}  # slot 0 held node 0, then spare 2 (the oldest), then spare 3
    assert not retired & set(cluster.slot_node) and not retired & set(cluster.warm)
    assert cluster.in_repair + len(cluster.warm) + cluster.active == 2
    assert r.finished


def test_host_selection_adds_exactly_its_minutes():
    spare, _ = run([node_failure(250.0)], failures=NODE_NEVER, cluster={"spare_nodes": 1})
    pooled, cluster = run(
        [node_failure(250.0)],
        failures=NODE_NEVER,
        cluster={"spare_nodes": 0, "pool_nodes": 1, "host_selection_minutes": 7},
    )
    assert spare.wall_hours * 3600 == pytest.approx(BASE_WALL_S + 30.0 + RECOVERY_S)
    assert (pooled.wall_hours - spare.wall_hours) * 3600 == pytest.approx(7 * 60.0)
    assert pooled.node_wait_hours * 3600 == pytest.approx(7 * 60.0)
    assert pooled.nodes_from_pool == 1 and pooled.preemptions == 0
    assert 2 in cluster.slot_node  # the pool's node (id 2) serves in the job
    # billed: the job's 2 nodes (4 GPUs) all along, the pool node (2 GPUs) from when it joined
    # (failure 250 s + detection 60 s + host selection 420 s)
    wall_s = pooled.wall_hours * 3600
    assert pooled.gpu_hours * 3600 == pytest.approx(4 * wall_s + 2 * (wall_s - 730.0))


def test_preemptible_nodes_come_last_and_after_their_delay():
    r, cluster = run(
        [node_failure(250.0)],
        failures=NODE_NEVER,
        cluster={"preemptible_nodes": 1, "preemption_minutes": 20},
    )
    assert r.nodes_from_pool == 1 and r.preemptions == 1
    assert r.node_wait_hours * 3600 == pytest.approx(20 * 60.0)


def test_a_repaired_pool_node_goes_back_to_its_pool_and_an_owned_node_to_the_spares():
    # node 0 fails at 250 s: the cold pool's node 2 joins; node 0 is repaired in about a
    # minute and becomes a warm spare (the fleet's own nodes always do); at 1,500 s node 2
    # fails in its turn: node 0 takes its slot, and node 2 goes back to the cold pool
    r, cluster = run(
        [node_failure(250.0), node_failure(1500.0)],
        failures=NODE_NEVER,
        cluster={"spare_nodes": 0, "pool_nodes": 1, "host_selection_minutes": 0.1},
        repair=repair(),
    )
    assert r.nodes_from_pool == 1
    assert cluster.slot_node == [0, 1] and list(cluster.cold) == [2]
    assert not cluster.warm


def test_a_maintenance_window_adds_its_duration_and_a_restart():
    r, _ = run(maintenance={"every_days": 900 / 86400, "duration_hours": 100 / 3600})
    # due at 900 s: the job stops at its checkpoint durable at 990 s, is down 100 s, restarts
    # (600 s + 5 s load); due again at 1800 s, just before its final checkpoint
    assert r.wall_hours * 3600 == pytest.approx(BASE_WALL_S + 100.0 + 605.0)
    assert r.downtime_hours * 3600 == pytest.approx(705.0)
    assert r.lost_work_hours == 0 and r.restarts == 1


@pytest.mark.parametrize("fault_prob", [1.0, 0.0])
def test_a_misdiagnosis_sends_a_healthy_node_and_keeps_the_faulty_one(fault_prob):
    r, cluster = run(
        [node_failure(250.0)],
        failures=lasting(fault_prob),
        cluster={"spare_nodes": 1},
        repair=repair(misdiagnosis_prob=0.999),
    )
    # node 0 failed in slot 0, but node 1 (slot 1) was sent to repair; node 0 stays, with
    # its lasting fault if the failure came from one
    assert cluster.slot_node == [0, 2] and list(cluster.warm) == [1]
    assert bool(cluster.faulty[0]) is (fault_prob == 1.0) and not cluster.faulty[1]


def test_technicians_queue_manual_repairs():
    with clusters() as made:
        simulate_replica(
            build_plan(
                tiny(
                    failures=NODE_NEVER,
                    cluster={"spare_nodes": 0},
                    repair=repair(
                        auto_minutes=0.01, escalate_prob=1.0, technicians=1, manual_hours=1
                    ),
                )
            ),
            0,
            1,
            injected=[node_failure(250.0, 0), node_failure(250.0, 1)],
        )
    shop = made[0].shop
    # both escalate to manual repair; the one technician works on one, the other waits (the
    # job, without spares, waits for both)
    assert shop.escalations == 2 and shop.technician_wait_s > 0


NEAR_DETERMINISTIC = [  # Weibull shape 100: lifetimes within ~1% of the mean
    {
        "name": "node",
        "scope": "node",
        "mtbf_hours": 700 / 3600,
        "distribution": "weibull",
        "weibull_shape": 100,
        "detect_minutes": 1,
        "repair_hours": 1e4,
    }
]


def first_detection_s(record, cause: str) -> float:
    return min(
        e["start_s"] for e in record.timeline if e["name"] == "detect" and e["cause"] == cause
    )


@pytest.mark.parametrize(("while_idle", "strikes_at_s"), [(True, 700.0), (False, 700.0 + 665.0)])
def test_a_class_that_spares_idle_nodes_stops_its_clock_while_the_job_is_down(
    while_idle, strikes_at_s
):
    crash = {"name": "crash", "scope": "job", "mtbf_hours": 1e15, "detect_minutes": 1}
    node = dict(NEAR_DETERMINISTIC[0], while_idle=while_idle)
    scenario = tiny(failures=[node, crash], cluster={"spare_nodes": 1})
    record = simulate_replica(
        build_plan(scenario), 0, 1, injected=[Failure(1, "crash", 250.0, (), 60.0, False, 0.0)],
        timeline=True,
    )  # fmt: skip
    # the node clocks run out after ~700 s: for a class that strikes idle nodes, while the job
    # is down after the crash (250-915 s); for one that does not, 450 s after it trains again
    assert first_detection_s(record, "node") == pytest.approx(strikes_at_s, abs=40.0)


def test_a_health_check_catches_a_failing_node_and_drains_it_without_lost_work():
    wears_out = dict(NEAR_DETERMINISTIC[0], mtbf_hours=900 / 3600)
    r, cluster = run(
        failures=[wears_out],
        cluster={"spare_nodes": 10},
        recovery={"restart_minutes": 0.1},
        health_checks={"every_hours": 300 / 3600, "cost_minutes": 10 / 60, "catch_prob": 1.0,
                       "lead_hours": 1000 / 3600},
    )  # fmt: skip
    # nodes wear out after ~900 s; every check (300 s apart) catches the nodes due within
    # 1,000 s, they leave at the next checkpoint, and no failure ever strikes the job
    assert r.failures == 0 and r.lost_work_hours == 0 and r.finished
    assert r.nodes_drained >= 4 and r.nodes_drained % 2 == 0
    assert cluster.active == 2


def test_without_a_check_the_same_nodes_fail():
    wears_out = dict(NEAR_DETERMINISTIC[0], mtbf_hours=900 / 3600)
    r, _ = run(failures=[wears_out], cluster={"spare_nodes": 10},
               recovery={"restart_minutes": 0.1})  # fmt: skip
    assert r.failures >= 1 and r.lost_work_hours > 0 and r.nodes_drained == 0


# Two node classes for the spare-order cases: `bad` (never strikes by itself) leaves a
# lasting fault, `wear` (a Weibull of shape 100: lifetimes within ~1% of the mean) leaves
# none. A healthy node wears out after ~1,000 h, a faulty one (1,000x) after ~3,600 s.
SPARE_ORDER_CLASSES = [
    dict(NODE_NEVER[0], name="bad", fault_prob=1.0),
    dict(NEAR_DETERMINISTIC[0], name="wear", mtbf_hours=1000.0, repair_hours=1.0),
]


def test_spare_order_decides_whether_a_falsely_fixed_node_goes_back_in_first():
    # 10,000 steps (11,000 s with the checkpoints); spares 2 and 3; every repair is a quick
    # false fix. At 250 s `bad` strikes node 0: it leaves at 310 s with a lasting fault, a
    # spare takes slot 0 (oldest: 2, newest: 3), node 0 is back within seconds, the newest
    # spare. At 2,000 s `wear` strikes node 1 (a transient fault): at 2,060 s slot 1 gets
    # the oldest spare (3, healthy) or the newest (node 0, faulty). Node 0 wears out ~3,600 s
    # later, long before the end; healthy nodes never do. So newest has exactly one failure
    # more, of a faulty node, and one more recovery: detection 60 s + restart 605 s + the
    # work since the last checkpoint (at most 110 s).
    injected = [
        Failure(0, "bad", 250.0, (0,), 60.0, True, 3600.0, scope="node"),
        Failure(1, "wear", 2000.0, (1,), 60.0, True, 3600.0, scope="node"),
    ]
    records = {}
    for order in ("oldest", "newest"):
        records[order] = r, cluster = run(
            injected,
            model={"tokens": 1.0e7},
            failures=SPARE_ORDER_CLASSES,
            cluster={"spare_nodes": 2, "lemon_rate_multiplier": 1000, "spare_order": order},
            repair=repair(auto_minutes=0.01, auto_false_fix_prob=1.0),
        )
        assert r.finished
    (oldest, first), (newest, last) = records["oldest"], records["newest"]
    assert (oldest.failures, oldest.failures_lemon, oldest.nodes_replaced) == (2, 0, 2)
    assert first.slot_node == [2, 3] and list(first.warm) == [0, 1]
    assert (newest.failures, newest.failures_lemon, newest.nodes_replaced) == (3, 1, 3)
    assert newest.failures_by_class == {"bad": 1, "wear": 2}
    # node 0 left slot 1 for repair again; node 1 (healthy, back from its repair) took it
    assert last.slot_node == [3, 1] and list(last.warm) == [2, 0]
    assert bool(last.faulty[0]) and not last.faulty[[1, 2, 3]].any()
    for r, failures in ((oldest, 2), (newest, 3)):
        assert r.wall_hours * 3600 == pytest.approx(
            11000.0 + failures * RECOVERY_S + r.lost_work_hours * 3600
        )
    lost_s = (newest.lost_work_hours - oldest.lost_work_hours) * 3600
    assert 0 < lost_s <= 110.0
    assert (newest.wall_hours - oldest.wall_hours) * 3600 == pytest.approx(RECOVERY_S + lost_s)


def test_random_spare_order_draws_a_spare():
    # spares 2 and 3: a failure of node 0 takes one of them, drawn from its own stream
    taken = set()
    for seed in range(8):
        with clusters() as made:
            simulate_replica(
                build_plan(tiny(failures=NODE_NEVER,
                                cluster={"spare_nodes": 2, "spare_order": "random"})),
                0, seed, injected=[node_failure(250.0)],
            )  # fmt: skip
        taken.add(int(made[0].slot_node[0]))
    assert taken == {2, 3}


@pytest.mark.parametrize(
    ("change", "path"),
    [
        # a cable's or the job's failure is no node's fault: nothing to keep
        ({"failures": [{"name": "c", "scope": "link", "mtbf_hours": 5, "fault_prob": 0.1}]},
         "failures.0.fault_prob"),
        ({"failures": [{"name": "n", "scope": "node", "mtbf_hours": 5, "fault_prob": 0.1,
                        "node_attributable": False}]},
         "failures.0.fault_prob"),
        ({"failures": [{"name": "g", "scope": "gpu", "mtbf_hours": 5, "fault_prob": 1.5}]},
         "failures.0.fault_prob"),
        ({"cluster": {"spare_order": "lifo"}}, "cluster.spare_order"),
    ],
)  # fmt: skip
def test_fault_prob_and_spare_order_are_refused_with_their_key_path(change, path):
    with pytest.raises(ScenarioError) as info:
        load_document(merge(TINY, change), "x.yaml")
    assert info.value.path == path


def test_fault_prob_makes_faults_matter():
    node = dict(NODE_NEVER[0], fault_prob=0.1)
    assert build_plan(tiny(failures=[node])).faults_matter
    assert not build_plan(tiny(failures=[node], cluster={"lemon_rate_multiplier": 1})).faults_matter
    # false fixes and misdiagnoses alone make no lasting fault
    assert not build_plan(
        tiny(failures=NODE_NEVER, repair=repair(auto_false_fix_prob=1.0, misdiagnosis_prob=0.5))
    ).faults_matter
    assert build_plan(tiny(failures=NODE_NEVER, cluster={"lemon_fraction": 0.5})).faults_matter
