"""The failure cycle in line (sim/engine/cycle.py) gives exactly the general path's numbers:
every column of every replica identical with the cycle on and off, on the configurations it
computes, on those it hands over from at each stage, and on random scenarios of the soak."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from benchmarks.cycle_soak import cycle_scenario, differences
from sim.engine import Failure, build_plan, cycle, simulate_replica
from sim.engine.job import Job
from sim.model.scenario import load_scenario
from sim.model.scenario_set import ScenarioError
from tests.conftest import ROOT

SCENARIOS = ROOT / "scenarios"
LEMONS = [  # lemons, the repair pipeline with false fixes and retirement, a cold pool
    "cluster.lemon_fraction=0.15",
    "cluster.lemon_rate_multiplier=5",
    "cluster.pool_nodes=16",
    "repair={technicians: 4, retire_after_failures: 3, auto_false_fix_prob: 0.3, "
    "manual_false_fix_prob: 0.1}",
]
PLANNED = [  # maintenance and health checks: the cycle hands over around them
    "maintenance={every_days: 2, duration_hours: 4}",
    "health_checks={every_hours: 12, cost_minutes: 10, lead_hours: 12}",
]


@pytest.fixture
def watched(monkeypatch):
    """Counts what the cycle did: failures it handled, and the stage of each hand-over."""
    seen: Counter = Counter()
    fire, run = cycle._strike, cycle.run_cycles

    def counted_fire(*args):
        seen["failures in line"] += 1
        return fire(*args)

    def counted_run(job):
        handed = run(job)
        seen[("stage", handed.stage) if handed.failure is not None else "stretch"] += 1
        return handed

    monkeypatch.setattr(cycle, "_strike", counted_fire)
    monkeypatch.setattr(cycle, "run_cycles", counted_run)
    monkeypatch.setattr("sim.engine.job.run_cycles", counted_run)
    return seen


def plan_of(name: str, overrides: list[str]):
    return build_plan(load_scenario(SCENARIOS / name, overrides=overrides).base)


@pytest.mark.parametrize(
    "name, overrides, replicas",
    [
        ("llama70b-1k.yaml", [], 30),
        ("llama70b-1k.yaml", ["cluster.spare_nodes=1", "failures.1.repair_hours=200"], 10),
        ("llama7b-128.yaml", LEMONS, 30),
        ("llama7b-128.yaml", [*LEMONS, "cluster.spare_nodes=0", "cluster.pool_nodes=2"], 20),
        ("llama7b-128.yaml", [*LEMONS, *PLANNED], 20),
        (
            "llama3-405b-16k.yaml",
            [*LEMONS, *(f"failures.{i}.while_idle=false" for i in range(5))],
            2,
        ),
        ("llama3-405b-16k.yaml", ["cluster.lemon_fraction=0.05", *PLANNED], 2),
    ],
)
def test_the_cycle_gives_the_general_paths_numbers(watched, name, overrides, replicas):
    plan = plan_of(name, overrides)
    assert differences(plan, replicas, seed=11) == []
    assert watched["failures in line"] > 0  # the cycle did the work


def test_every_hand_over_is_exercised(watched):
    """The cycle hands over at the start of a stretch, and with a failure before detection,
    after sending the nodes to repair (spares and pools short) and before the restart (a
    planned stop due first): each gives the same numbers, and each happens here."""
    cases = [
        ("llama7b-128.yaml", [*LEMONS, "cluster.spare_nodes=0", "cluster.pool_nodes=2"], 20),
        ("llama7b-128.yaml", [*LEMONS, *PLANNED], 20),
        ("llama70b-1k.yaml", [*PLANNED, "health_checks.every_hours=0.25"], 3),
    ]
    for name, overrides, replicas in cases:
        assert differences(plan_of(name, overrides), replicas, seed=5) == []
    stages = {key[1] for key in watched if isinstance(key, tuple)}
    assert {cycle.QUICK_NONE, cycle.QUICK_TAKEN, cycle.QUICK_REPLACED} <= stages, watched
    assert watched["stretch"] > 0


def test_health_checks_in_line_give_the_general_paths_numbers(monkeypatch):
    """A health check due in a stretch is done in line (`cycle._health_check`): the stretch
    carried, the nodes looked at, the cost held; a failure that ends the hold goes to the
    outage in line; a check whose hold something else would interrupt (maintenance, every
    0.49 days, falls inside a check's 30 minutes now and then) goes the general way. Each
    happens here, and every replica's numbers are the general path's."""
    seen: Counter = Counter()
    check = cycle._health_check

    def counted(*args):
        outcome = check(*args)
        seen["hand back" if outcome is cycle.HAND_BACK else outcome is None] += 1
        return outcome

    monkeypatch.setattr(cycle, "_health_check", counted)
    checks = [
        "maintenance={every_days: 0.49, duration_hours: 1}",
        "health_checks={every_hours: 1, cost_minutes: 30, lead_hours: 2}",
    ]
    assert differences(plan_of("llama7b-128.yaml", [*LEMONS, *checks]), 10, seed=3) == []
    assert seen["hand back"] and seen[True] and seen[False], seen


def test_caught_nodes_drained_in_line_give_the_general_paths_numbers(monkeypatch):
    """Nodes a check caught are drained at the stretch's first checkpoint in line: the
    stretch booked there, the nodes sent to repair, the job refilled and restarted in line
    (`Job._quick_back`), or handed over after sending them (pools short) or after the
    refill (something else due before the restart ends); a failure may abort the restart.
    Each happens here, and every replica's numbers are the general path's."""
    seen: Counter = Counter()
    back = Job._quick_back

    def counted(job, failures):
        stage, result = back(job, failures)
        if not failures:  # a drain
            seen[stage if stage != cycle.QUICK_ALL else ("restarted", result is None)] += 1
        return stage, result

    monkeypatch.setattr(Job, "_quick_back", counted)
    checks = "health_checks={every_hours: 1, cost_minutes: 30, lead_hours: 2}"
    for overrides in (
        [*LEMONS, "maintenance={every_days: 0.49, duration_hours: 1}", checks],
        [*LEMONS, "cluster.spare_nodes=0", "cluster.pool_nodes=2", checks],
    ):
        assert differences(plan_of("llama7b-128.yaml", overrides), 10, seed=3) == []
    daily = "health_checks={every_hours: 24, cost_minutes: 10, lead_hours: 12}"
    sixteen_k = plan_of("llama3-405b-16k.yaml", ["cluster.lemon_fraction=0.05", daily])
    assert differences(sixteen_k, 2, seed=3) == []  # a restart aborted by a failure
    assert {
        cycle.QUICK_TAKEN,
        cycle.QUICK_REPLACED,
        ("restarted", True),
        ("restarted", False),
    } <= set(seen), seen


def test_random_scenarios_give_the_same_numbers(watched):
    rng = random.Random(2026)
    ran = 0
    for i in range(80):
        try:
            scenario = cycle_scenario(rng, random.Random(f"cycle-ops-{i}"))
        except ScenarioError:
            continue
        plan = build_plan(scenario)
        assert differences(plan, 2, seed=i) == [], scenario.model_dump_json(exclude_defaults=True)
        ran += 1
    assert ran >= 60
    assert watched["failures in line"] > 800


def test_injected_failures_and_instant_recoveries_give_the_same_numbers(watched):
    """Injected failures are SimPy processes: the cycle hands over before each is due. With
    no detection time and no restart time the outage's parts are empty."""
    plan = plan_of("llama70b-1k.yaml", ["failures.1.mtbf_hours=2000"])
    injected = [
        Failure(1, "host", t * 3600.0, (t % plan.nodes,), 300.0, True, 3600.0, "node")
        for t in (5, 17, 40, 41)
    ]
    for r in range(5):
        records = []
        for on in (False, True):
            cycle.ENABLED = on
            try:
                records.append(simulate_replica(plan, r, 2, injected=injected).row())
            finally:
                cycle.ENABLED = True
        assert records[0] == records[1]
    instant = [
        *(f"failures.{i}.detect_minutes=0" for i in range(5)),
        "recovery.restart_minutes=0",
    ]
    assert differences(plan_of("llama7b-128.yaml", [*LEMONS, *instant]), 10, seed=4) == []
    assert watched["failures in line"] > 0


def test_the_cycle_stays_out_of_what_it_does_not_compute(watched):
    """A timeline, async checkpoints, an elastic job, an in-memory level, the fabric, the
    gray failures, backups: the general path."""
    for name, overrides in [
        ("llama70b-1k.yaml", ["checkpoint.mode=async"]),
        ("llama70b-1k.yaml", ["recovery.policy=elastic"]),
        ("llama70b-1k.yaml", ["checkpoint.memory_every_steps=50"]),
        ("llama70b-1k-fabric.yaml", []),
        ("llama70b-1k-gray.yaml", []),
        ("llama70b-1k.yaml", ["storage.backup={kind: object, every: 2}"]),
    ]:
        plan = plan_of(name, overrides)
        assert differences(plan, 5, seed=1) == []
    plan = plan_of("llama70b-1k.yaml", [])
    simulate_replica(plan, 0, 1, timeline=True)
    simulate_replica(plan, 0, 1, incidents=True)
    assert watched["failures in line"] == 0
