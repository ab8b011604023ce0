"""What SimPy itself costs on this machine, and what that implies for the engine's CPU per
failure: the floor under any engine built from SimPy processes, timeouts and resources.

It measures, on one core (process time):
  - a bare timeout event (one process yielding timeouts in a loop);
  - an interrupt (one process interrupting another that waits on a timeout);
  - one node through a repair modelled as the engine models it, a SimPy process that
    waits, requests a technician from a `simpy.Resource` (capacity 80) and waits again;
and counts the SimPy events the engine schedules per failure in the 4,096-node,
256-day case of bench_engine.py with lemons and the repair pipeline (one replica), to
give the lower bound events × µs/event, before any of the engine's own Python.

Usage: .venv/bin/python benchmarks/simpy_floor.py [--events 200000] [--no-engine]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import simpy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def per_event_timeout(n: int) -> float:
    env = simpy.Environment()

    def loop():
        for _ in range(n):
            yield env.timeout(1.0)

    env.process(loop())
    start = time.process_time()
    env.run()
    return (time.process_time() - start) / n * 1e6


def per_interrupt(n: int) -> float:
    env = simpy.Environment()

    def sleeper():
        while True:
            with contextlib.suppress(simpy.Interrupt):
                yield env.timeout(1e9)

    target = env.process(sleeper())

    def waker():
        for _ in range(n):
            yield env.timeout(1.0)
            target.interrupt()

    env.process(waker())
    start = time.process_time()
    env.run(until=n + 0.5)
    bare = per_event_timeout(n) * n / 1e6
    return (time.process_time() - start - bare) / n * 1e6


def per_repair(n: int) -> float:
    env = simpy.Environment()
    technicians = simpy.Resource(env, capacity=80)

    def repair():
        yield env.timeout(1.0)
        with technicians.request() as turn:
            yield turn
            yield env.timeout(2.0)

    def spawner():
        for _ in range(n):
            env.process(repair())
            yield env.timeout(0.1)

    env.process(spawner())
    start = time.process_time()
    env.run()
    bare = per_event_timeout(n) * n / 1e6  # the spawner's own timeouts
    return (time.process_time() - start - bare) / n * 1e6


def engine_events_per_failure() -> tuple[float, float, float]:
    """(SimPy events per failure, failures, CPU µs per failure) of one replica of the
    4,096-node case with lemons and the repair pipeline."""
    import bench_engine as bench

    bench.import_engine(ROOT)
    overrides, _ = bench.big_overrides(ROOT)
    plan, why = bench.plan_of(
        ROOT / "scenarios" / "llama3-405b-16k.yaml", overrides + bench.OPS_BIG
    )
    assert plan is not None, why
    counted = [0]
    schedule = simpy.Environment.schedule

    def counting(self, event, priority=1, delay=0):
        counted[0] += 1
        return schedule(self, event, priority, delay)

    simpy.Environment.schedule = counting  # type: ignore[method-assign]
    try:
        record = bench.simulate_replica(plan, 0, 0)
    finally:
        simpy.Environment.schedule = schedule  # type: ignore[method-assign]
    start = time.process_time()
    bench.simulate_replica(plan, 0, 0)
    cpu = time.process_time() - start
    return counted[0] / record.failures, record.failures, cpu / record.failures * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--no-engine", action="store_true", help="skip the engine's event count")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    timeout_us = min(per_event_timeout(args.events) for _ in range(3))
    interrupt_us = min(per_interrupt(args.events // 2) for _ in range(3))
    repair_us = min(per_repair(args.events // 4) for _ in range(3))
    print(f"SimPy {simpy.__version__}, Python {sys.version.split()[0]}, one core (process time)")
    print(f"  timeout event                          {timeout_us:6.2f} µs")
    print(f"  interrupt of a waiting process         {interrupt_us:6.2f} µs")
    print(f"  a repair: process + Resource + 2 waits {repair_us:6.2f} µs")
    if not args.no_engine:
        events, failures, cpu_us = engine_events_per_failure()
        print(
            f"engine, 4,096 nodes + lemons + repair pipeline: {failures:,} failures, "
            f"{events:.1f} SimPy events per failure, {cpu_us:.0f} µs CPU per failure"
        )
        print(
            f"  floor from SimPy alone: {events:.1f} events x {timeout_us:.2f} µs = "
            f"{events * timeout_us:.1f} µs per failure (target 10 µs)"
        )


if __name__ == "__main__":
    main()
