"""The engine's four speed targets, measured side by side in one run on this machine.

  1. trainsim against AIReSim on AIReSim's paper scenario: CPU per replica, the peer's over
     ours (target >= 100x; needs --peer, the folder holding AIReSim's `airesim` package);
  2. the engine's CPU per failure on the 4,096-node, 256-day case with lemons over the
     bare failure cycle's superposed floor (design_floor.py; target <= 2x);
  3. the 16k-GPU operations case (bench_engine.py's llama3-405b-16k+ops) in bare SimPy
     event equivalents per replica: its CPU per replica over this machine's cost of one
     bare `env.timeout` (target <= 18,000);
  4. the reference scenario (scenarios/llama70b-1k.yaml, the README's quick start) in the
     same unit (target <= 600).
Memory: the traced peak of one replica of each engine case, first round and last (flat:
the same).

Each round measures every figure once, one after another on one core (process CPU time),
with the unit measured inside the round: the machine's speed drifts by tens of percent
between minutes, so the figures are ratios within a round, and the best round is kept.

Usage: .venv/bin/python benchmarks/speed_targets.py [--peer DIR] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_engine import OPS_16K, OPS_LEMONS, big_overrides, import_engine  # noqa: E402
from benchmarks.design_floor import replica_superposed  # noqa: E402
from benchmarks.simpy_floor import per_event_timeout  # noqa: E402

TARGETS = {"airesim": 100.0, "floor": 2.0, "ops16k": 18_000.0, "reference": 600.0}


def cpu_per_replica(plan, replicas: int, seed: int = 0) -> tuple[float, float]:
    """CPU seconds per replica and failures per replica of `replicas` engine replicas."""
    from sim.engine import simulate_replica

    start, failures = time.process_time(), 0
    for r in range(replicas):
        failures += simulate_replica(plan, r, seed).failures
    return (time.process_time() - start) / replicas, failures / replicas


def peak_mb(plan) -> float:
    from sim.engine import simulate_replica

    tracemalloc.start()
    simulate_replica(plan, 0, 0)
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return peak


def plans():
    """The engine cases: the reference, the 16k operations case, the 4k lemons case and
    AIReSim's paper scenario (as a trainsim scenario)."""
    from sim.engine import build_plan
    from sim.model.scenario import load_scenario

    scenarios = ROOT / "scenarios"
    path_16k = scenarios / "llama3-405b-16k.yaml"
    overrides, _ = big_overrides(ROOT)
    idle = [
        f"failures.{i}.while_idle=false" for i in range(len(load_scenario(path_16k).base.failures))
    ]
    return {
        "reference": build_plan(load_scenario(scenarios / "llama70b-1k.yaml").base),
        "ops16k": build_plan(load_scenario(path_16k, overrides=OPS_16K).base),
        "lemons4k": build_plan(
            load_scenario(path_16k, overrides=overrides + OPS_LEMONS + idle).base
        ),
        "airesim": build_plan(
            load_scenario(ROOT / "benchmarks" / "airesim_paper.yaml").points[0].scenario
        ),
    }


def one_round(plan_of: dict, peer: Path | None, round_: int) -> dict[str, float]:
    """Every figure once: returns the four ratios and their parts."""
    from sim.engine import simulate_replica

    out: dict[str, float] = {}
    out["unit_us"] = per_event_timeout(200_000)
    ref_s, _ = cpu_per_replica(plan_of["reference"], 300)
    out["reference"] = ref_s / (out["unit_us"] * 1e-6)
    ops_s, _ = cpu_per_replica(plan_of["ops16k"], 20)
    out["ops16k"] = ops_s / (out["unit_us"] * 1e-6)
    out["ops16k_ms"] = ops_s * 1e3
    plan = plan_of["lemons4k"]
    start, failures = time.process_time(), 0
    failures += replica_superposed(plan, round_)
    floor_us = (time.process_time() - start) / failures * 1e6
    start = time.process_time()
    failures = simulate_replica(plan, round_, 0).failures
    engine_us = (time.process_time() - start) / failures * 1e6
    out["floor_us"], out["engine_us"], out["floor"] = floor_us, engine_us, engine_us / floor_us
    if peer is not None:
        from benchmarks.vs_airesim import peer_replica, trainsim_replicas

        peer_s, _, _ = peer_replica(seed=1 + round_)
        ours_s, _, _ = trainsim_replicas(plan_of["airesim"], 5, round_ * 5)
        out["peer_s"], out["ours_s"], out["airesim"] = peer_s, ours_s, peer_s / ours_s
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, help="folder holding AIReSim's `airesim/`")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.peer is not None:
        if not (args.peer / "airesim" / "simulator.py").is_file():
            parser.error(f"--peer {args.peer}: no airesim/simulator.py there")
        sys.path.insert(0, str(args.peer))
    import_engine(ROOT)
    plan_of = plans()
    from sim.engine import simulate_replica

    for plan in plan_of.values():
        simulate_replica(plan, 10_000, 0)  # imports and caches, paid once
    memory = {name: [peak_mb(plan)] for name, plan in plan_of.items() if name != "airesim"}
    print(f"Python {sys.version.split()[0]}; CPU time on one core; best of {args.rounds} rounds")
    print(
        f"{'round':>5} {'µs/timeout':>10} {'vs AIReSim':>11} {'engine/floor':>13} "
        f"{'16k ops (ev)':>13} {'reference (ev)':>15}"
    )
    rounds = []
    for round_ in range(1, args.rounds + 1):
        r = one_round(plan_of, args.peer, round_)
        rounds.append(r)
        peer = f"{r['airesim']:>10.0f}x" if "airesim" in r else f"{'-':>11}"
        print(
            f"{round_:>5} {r['unit_us']:>10.3f} {peer} {r['floor']:>12.2f}x "
            f"{r['ops16k']:>13,.0f} {r['reference']:>15,.0f}"
        )
    for name, plan in plan_of.items():
        if name in memory:
            memory[name].append(peak_mb(plan))
    best = {
        "airesim": max((r["airesim"] for r in rounds if "airesim" in r), default=None),
        "floor": min(r["floor"] for r in rounds),
        "ops16k": min(r["ops16k"] for r in rounds),
        "reference": min(r["reference"] for r in rounds),
    }
    print()
    words = {
        "airesim": ("AIReSim's CPU per replica over trainsim's", ">="),
        "floor": ("engine over the superposed floor, µs per failure", "<="),
        "ops16k": ("16k-GPU operations case, bare-event equivalents per replica", "<="),
        "reference": ("reference scenario, bare-event equivalents per replica", "<="),
    }
    for key, (what, sense) in words.items():
        value, target = best[key], TARGETS[key]
        if value is None:
            print(f"{what}: not measured (--peer DIR)")
            continue
        met = value >= target if sense == ">=" else value <= target
        print(f"{what}: {value:,.2f} (target {sense} {target:,.0f}) {'met' if met else 'MISSED'}")
    print(
        "traced peak MB per replica, first round / last: "
        + ", ".join(f"{name} {a:.2f} / {b:.2f}" for name, (a, b) in memory.items())
    )


if __name__ == "__main__":
    main()
