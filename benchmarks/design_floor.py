"""The floor of the engine's design on this machine: the bare failure cycle of the
4,096-node, 256-day case with lemons (bench_engine.py's big-4k-256d+lemons), written as one
inlined loop on SimPy, with none of the engine's other features. It prices what the design
itself costs per failure before any of trainsim's semantics beyond the cycle, and what the
clock layout costs:

  per-class  one clock per node for each node-level failure class (as the engine keeps them:
             a failure renews its class's clock, a spare starts one clock per class), which
             keeps common random numbers per node and per class across sweep points;
  merged     one clock per node at the sum of its classes' rates, the class drawn when it
             strikes (one clock to start per spare; common random numbers per node only);
  superposed one clock per exponential class for all nodes (the next failure where the
             class's cumulative hazard reaches an Exp(1) draw, its rate the sum over the
             nodes in use, lemons at their multiple), the victim drawn in proportion to the
             rates from two groups (lemons and the rest); a spare starts no clock.
             Exact in distribution for exponential lives; common random numbers per class.

The cycle: lifetimes in compute time (every class `while_idle: false`, so nothing fails
during an outage), a heap of clocks whose top is the victim, sync checkpoints in closed
form, detection and restart, the node to repair with its whole path drawn (automated
repair, escalation to a technician served first come first served, false fixes that keep a
lemon's fault), the oldest warm spare in, one SimPy timeout per stretch and one per
outage. Job-level classes keep one clock each. Not modelled: the pool, retirement, RMA,
lasting faults left by failures, the ledger's parts, anything the engine does besides.

Usage: .venv/bin/python benchmarks/design_floor.py [--replicas 3] [--rounds 2] [--engine]
Prints µs of CPU per failure for each layout; with --engine, the engine's own replicas of
the same case (bench_engine.py's big-4k-256d+lemons) run in each round too, interleaved, so
that the engine's cost over the floor is measured under the same load (the machine's speed
can move by half between runs minutes apart: compare within a round).
"""

from __future__ import annotations

import argparse
import heapq
import math
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np
import simpy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_engine import OPS_LEMONS, big_overrides, import_engine  # noqa: E402

BLOCK = 4096


def floats(rng: np.random.Generator, exponential: bool):
    """An endless stream of Python floats drawn in numpy blocks."""
    while True:
        block = rng.standard_exponential(BLOCK) if exponential else rng.random(BLOCK)
        yield from block.tolist()


def stretch_figures(plan):
    """Step, checkpoint interval (steps), snapshot, one checkpoint cycle, restart with its
    load (seconds) and the whole run's compute (seconds) of the full job."""
    step, interval = plan.step_s, plan.interval_steps
    snapshot = plan.snapshot_s(plan.nodes)
    restart = plan.restart_s + plan.load_s(plan.nodes)
    return step, interval, snapshot, interval * step + snapshot, restart, plan.total_steps * step


def draws_and_lemons(plan, seed: int):
    """A replica's draws (exponential and uniform floats for failures and for repairs) and
    its lemons, placed at random over the fleet."""
    rng_fail, rng_repair, rng_lemons = (
        np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence(seed).spawn(3)
    )
    fleet = plan.nodes + plan.spare_nodes
    faulty = [False] * fleet
    count = round(plan.lemon_fraction * fleet)
    for n in rng_lemons.choice(fleet, size=count, replace=False).tolist():
        faulty[n] = True
    return (
        floats(rng_fail, True).__next__,
        floats(rng_fail, False).__next__,
        floats(rng_repair, True).__next__,
        floats(rng_repair, False).__next__,
        faulty,
    )


def repair_shop(rp, rexp, runi, faulty: list[bool], warm: deque):
    """The repair path of a failed node, drawn when it leaves (automated repair, escalation
    to a technician served first come first served, false fixes that keep a lemon's
    fault), and the calendar advanced to a time (the nodes back by then join the warm
    spares). Returns (to_repair(node, now), advance(t))."""
    returns: list[tuple[float, int, int, bool]] = []
    queue: list[tuple[float, int, int, float, bool]] = []
    free = [0.0] * (rp.technicians or 1)
    heappush, heappop = heapq.heappush, heapq.heappop
    seq = [0]

    def to_repair(node: int, now: float) -> None:
        seq[0] += 1
        auto_end = now + rexp() * rp.auto_s
        if runi() >= rp.escalate_prob:
            heappush(returns, (auto_end, seq[0], node, runi() >= rp.auto_false_fix_prob))
        else:
            manual, fixed = rexp() * rp.manual_s, runi() >= rp.manual_false_fix_prob
            heappush(queue, (auto_end, seq[0], node, manual, fixed))

    def advance(t: float) -> None:
        while True:
            if queue and queue[0][0] <= t and (not returns or queue[0][0] <= returns[0][0]):
                arrival, s, n, manual, fixed = heappop(queue)
                begin = arrival if arrival > free[0] else free[0]
                heapq.heapreplace(free, begin + manual)
                heappush(returns, (begin + manual, s, n, fixed))
            elif returns and returns[0][0] <= t:
                _, _, n, fixed = heappop(returns)
                if fixed:
                    faulty[n] = False
                warm.append(n)
            else:
                break

    return to_repair, advance


def replica(plan, seed: int, merged: bool) -> int:
    """One replica of the bare cycle; returns the failures it saw."""
    env = simpy.Environment()
    exp, uni, rexp, runi, faulty = draws_and_lemons(plan, seed)
    nodes, spares = plan.nodes, plan.spare_nodes
    fleet = nodes + spares
    mult = plan.lemon_multiplier
    node_means, job_means = [], []
    for fc in plan.failure_classes:
        mean = fc.lifetime_s.mean
        if fc.scope == "gpu":
            node_means.append(mean / plan.gpus_per_node)  # the first of its GPUs' lifetimes
        elif fc.scope == "node":
            node_means.append(mean)
        else:
            job_means.append(mean / max(fc.components, 1))
    classes = len(node_means)
    rates = [1.0 / m for m in node_means]
    total_rate = sum(rates)
    cumulative = list(np.cumsum(rates) / total_rate)
    detect = [fc.detect_s for fc in plan.failure_classes if fc.scope in ("gpu", "node")]
    job_detect = [fc.detect_s for fc in plan.failure_classes if fc.scope not in ("gpu", "node")]
    rp = plan.repair
    step, interval, snapshot, cycle, restart, remaining = stretch_figures(plan)
    heap: list[tuple[float, int, int]] = []  # (end in compute time, class or -1 - job class, node)
    # per-class: ends[c][slot]; merged: ends[0][slot]
    ends = [[0.0] * nodes for _ in range(1 if merged else classes)]
    slot_node = list(range(nodes))
    heappush, heappop = heapq.heappush, heapq.heappop

    def start_clocks(slot: int, node: int, tau: float) -> None:
        scale = 1.0 / mult if faulty[node] else 1.0
        if merged:
            end = tau + exp() / total_rate * scale
            ends[0][slot] = end
            heappush(heap, (end, 0, slot))
            return
        for c in range(classes):
            end = tau + exp() * node_means[c] * scale
            ends[c][slot] = end
            heappush(heap, (end, c, slot))

    for slot in range(nodes):
        start_clocks(slot, slot, 0.0)
    for j, mean in enumerate(job_means):
        heappush(heap, (exp() * mean, -1 - j, 0))
    warm = deque(range(nodes, fleet))
    to_repair, advance = repair_shop(rp, rexp, runi, faulty, warm)
    failures = [0]

    def job():
        tau = 0.0  # compute time
        left = remaining
        while True:
            end, cls, slot = heap[0]
            while cls >= 0 and ends[0 if merged else cls][slot] != end:  # stale
                heappop(heap)
                end, cls, slot = heap[0]
            dt = end - tau
            finish = left + -(-left // (interval * step)) * snapshot
            if dt >= finish:
                yield env.timeout(finish)
                return
            yield env.timeout(dt)
            tau = end
            done = int(dt // cycle) * interval * step
            left -= done
            failures[0] += 1
            now = env.now
            if cls < 0:  # the job itself: renew its clock, restart
                heappop(heap)
                heappush(heap, (tau + exp() * job_means[-1 - cls], cls, 0))
                yield env.timeout(job_detect[-1 - cls] + restart)
                continue
            node = slot_node[slot]
            if merged:
                u = uni()
                cls = 0
                while cumulative[cls] < u and cls < classes - 1:
                    cls += 1
            heappop(heap)
            exp()  # the failed class's clock renewed (the engine's draw), then the node leaves
            for row in ends:
                row[slot] = float("inf")
            # the repair path, drawn now
            to_repair(node, now)
            advance(now + detect[cls])
            spare = warm.popleft()
            slot_node[slot] = spare
            start_clocks(slot, spare, tau)
            yield env.timeout(detect[cls] + restart)

    env.run(until=env.process(job()))
    return failures[0]


def replica_superposed(plan, seed: int) -> int:
    """One replica of the bare cycle with superposed class clocks; returns its failures."""
    env = simpy.Environment()
    exp, uni, rexp, runi, faulty = draws_and_lemons(plan, seed)
    nodes, spares = plan.nodes, plan.spare_nodes
    fleet = nodes + spares
    mult = plan.lemon_multiplier
    rates, job_rates, detect, job_detect = [], [], [], []
    for fc in plan.failure_classes:
        mean = fc.lifetime_s.mean
        if fc.scope in ("gpu", "node"):
            rates.append(plan.gpus_per_node / mean if fc.scope == "gpu" else 1.0 / mean)
            detect.append(fc.detect_s)
        else:
            job_rates.append(max(fc.components, 1) / mean)
            job_detect.append(fc.detect_s)
    classes = len(rates)
    rp = plan.repair
    step, interval, snapshot, cycle, restart, remaining = stretch_figures(plan)
    # the nodes in use in two groups (0: healthy, 1: with a fault), each a list with the
    # position of every node in it, for a uniform pick and a removal in O(1)
    groups: list[list[int]] = [[], []]
    where = [0] * fleet  # node -> its index in its group
    for node in range(nodes):
        g = groups[faulty[node]]
        where[node] = len(g)
        g.append(node)
    slot_of = {node: node for node in range(nodes)}
    # each class: hazard left until its next failure (an Exp(1) draw), spent at its rate
    left_hazard = [exp() for _ in range(classes)]
    job_left = [exp() for _ in job_rates]
    warm = deque(range(nodes, fleet))
    to_repair, advance = repair_shop(rp, rexp, runi, faulty, warm)
    failures = [0]

    def take(node: int) -> None:
        g = groups[faulty[node]]
        last = g.pop()
        if last != node:
            g[where[node]] = last
            where[last] = where[node]

    def put(node: int) -> None:
        g = groups[faulty[node]]
        where[node] = len(g)
        g.append(node)

    def job():
        left = remaining
        while True:
            weight = len(groups[0]) + mult * len(groups[1])
            # the next failure: the class (or job class) whose hazard runs out first
            dt, cls = math.inf, 0
            for c in range(classes):
                t = left_hazard[c] / (rates[c] * weight)
                if t < dt:
                    dt, cls = t, c
            for j, rate in enumerate(job_rates):
                t = job_left[j] / rate
                if t < dt:
                    dt, cls = t, -1 - j
            finish = left + -(-left // (interval * step)) * snapshot
            if dt >= finish:
                yield env.timeout(finish)
                return
            yield env.timeout(dt)
            for c in range(classes):  # every class spent its hazard over dt
                left_hazard[c] -= rates[c] * weight * dt
            for j, rate in enumerate(job_rates):
                job_left[j] -= rate * dt
            done = int(dt // cycle) * interval * step
            left -= done
            failures[0] += 1
            now = env.now
            if cls < 0:
                job_left[-1 - cls] = exp()
                yield env.timeout(job_detect[-1 - cls] + restart)
                continue
            left_hazard[cls] = exp()
            # the victim, in proportion to the rates
            u = uni() * weight
            healthy = len(groups[0])
            if u < healthy:
                node = groups[0][int(u)]
            else:
                node = groups[1][min(int((u - healthy) / mult), len(groups[1]) - 1)]
            take(node)
            slot = slot_of.pop(node)
            to_repair(node, now)
            advance(now + detect[cls])
            spare = warm.popleft()
            slot_of[spare] = slot
            put(spare)
            yield env.timeout(detect[cls] + restart)

    env.run(until=env.process(job()))
    return failures[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (best kept)")
    parser.add_argument("--engine", action="store_true", help="the engine's replicas too")
    args = parser.parse_args()
    import_engine(ROOT)
    from sim.engine import build_plan, simulate_replica
    from sim.model.scenario import load_scenario

    path = ROOT / "scenarios" / "llama3-405b-16k.yaml"
    overrides, _ = big_overrides(ROOT)
    idle = [f"failures.{i}.while_idle=false" for i in range(len(load_scenario(path).base.failures))]
    plan = build_plan(load_scenario(path, overrides=overrides + OPS_LEMONS + idle).base)
    layouts = ["per-class", "merged", "superposed", *(["engine"] if args.engine else [])]
    best: dict[str, float] = {}
    for round_ in range(1, args.rounds + 1):
        figures = {}
        for layout in layouts:
            start, failures = time.process_time(), 0
            for seed in range(args.replicas):
                if layout == "engine":
                    failures += simulate_replica(plan, seed, 0).failures
                elif layout == "superposed":
                    failures += replica_superposed(plan, seed)
                else:
                    failures += replica(plan, seed, layout == "merged")
            us = figures[layout] = (time.process_time() - start) / failures * 1e6
            best[layout] = min(best.get(layout, us), us)
        shown = ", ".join(f"{k} {v:.2f}" for k, v in figures.items())
        if args.engine:
            shown += f"; engine / per-class {figures['engine'] / figures['per-class']:.2f}"
        print(f"round {round_}: µs of CPU per failure: {shown}")
    print("best: " + ", ".join(f"{k} {v:.2f} µs" for k, v in best.items()))


if __name__ == "__main__":
    main()
