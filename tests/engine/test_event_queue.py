"""SimPy's queue holds only live events: a wait the job gives up (an interrupt from another
process: a returning node, a health check, the tier) is taken out of the queue, and failures
do not go through interrupts at all (the job's one timeout runs to the next of them)."""

from __future__ import annotations

from unittest import mock

import simpy

from sim.engine import build_plan, simulate, simulate_replica
from sim.model.scenario import load_scenario
from tests.conftest import ROOT

OPS = [
    "cluster.lemon_fraction=0.1",
    "cluster.lemon_rate_multiplier=5",
    "cluster.pool_nodes=8",
    "repair={technicians: 3, retire_after_failures: 3, manual_false_fix_prob: 0.2}",
    "maintenance={every_days: 3, duration_hours: 4}",
    "health_checks={every_hours: 24, cost_minutes: 10, lead_hours: 12}",
    "failures.0.while_idle=false",
]


class Counting(simpy.Environment):
    """An environment that counts the timeouts it pops with nobody waiting for them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stale = self.popped = 0

    def step(self) -> None:
        _, _, _, event = self._queue[0]
        self.popped += 1
        if isinstance(event, simpy.Timeout) and not event.callbacks:
            self.stale += 1
        super().step()


def test_no_stale_timeout_is_left_in_the_queue():
    envs: list[Counting] = []

    def made(*args, **kwargs):
        env = Counting(*args, **kwargs)
        envs.append(env)
        return env

    for name, overrides in [
        ("llama70b-1k.yaml", OPS),
        ("llama70b-1k-gray.yaml", []),
        ("llama70b-1k-fabric.yaml", []),
    ]:
        plan = build_plan(load_scenario(ROOT / "scenarios" / name, overrides=overrides).base)
        with mock.patch.object(simulate.simpy, "Environment", made):
            records = [simulate_replica(plan, r, 3) for r in range(20)]
        assert sum(r.failures for r in records) > 0
    assert sum(env.popped for env in envs) > 0
    assert sum(env.stale for env in envs) == 0
