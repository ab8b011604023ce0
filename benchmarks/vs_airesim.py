"""trainsim against AIReSim (arXiv 2603.07041) on AIReSim's own paper scenario: CPU time
per replica, side by side, interleaved in one process.

Usage:
    .venv/bin/python benchmarks/vs_airesim.py --peer DIR [--rounds 3] [--replicas 5]

DIR is the folder that holds AIReSim's `airesim` package (a checkout of
github.com/karthikp-ubc/airesim, or its package folder copied anywhere; it needs only
simpy). trainsim runs `benchmarks/airesim_paper.yaml`, the same scenario written as a
trainsim scenario (the mapping is in its comments). Each round runs one AIReSim replica
and then `--replicas` trainsim replicas, one after another in this process on one core,
and times each side's process CPU time; the ratio is AIReSim's CPU per replica over
trainsim's, per round and for the best round of each side (the machine's speed drifts
between rounds; interleaving keeps both sides under the same drift). It also prints each
side's failures per replica and time to train, so a reader sees that both simulate the
same cluster.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.engine import simulate_replica  # noqa: E402
from sim.engine.plan import build_plan  # noqa: E402
from sim.model.scenario import load_scenario  # noqa: E402

SCENARIO = ROOT / "benchmarks" / "airesim_paper.yaml"


def peer_replica(seed: int) -> tuple[float, float, float]:
    """CPU seconds, failures and training days of one AIReSim replica (its defaults)."""
    from airesim.params import Params
    from airesim.simulator import Simulator

    start = time.process_time()
    stats = Simulator(Params(), seed=seed).run()
    cpu = time.process_time() - start
    summary = stats.summary_dict()
    return cpu, summary["total_failures"], summary["total_training_time_hrs"] / 24


def trainsim_replicas(plan, replicas: int, first: int) -> tuple[float, float, float]:
    """CPU seconds per replica, failures and days per replica of `replicas` trainsim
    replicas (ids from `first`)."""
    start = time.process_time()
    records = [simulate_replica(plan, seed=42, replica=first + r) for r in range(replicas)]
    cpu = (time.process_time() - start) / replicas
    failures = sum(r.failures for r in records) / replicas
    days = sum(r.wall_hours for r in records) / replicas / 24
    return cpu, failures, days


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", required=True, type=Path, help="folder holding `airesim/`")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=5, help="trainsim replicas per round")
    args = parser.parse_args()
    if not (args.peer / "airesim" / "simulator.py").is_file():
        parser.error(f"--peer {args.peer}: no airesim/simulator.py there")
    sys.path.insert(0, str(args.peer))

    plan = build_plan(load_scenario(SCENARIO).points[0].scenario)
    simulate_replica(plan, seed=42, replica=10_000)  # warm the caches both sides pay once
    print(f"{'round':>5} {'AIReSim s':>10} {'trainsim s':>11} {'ratio':>7}   failures   days")
    best_peer = best_ours = float("inf")
    for round_ in range(args.rounds):
        peer_cpu, peer_failures, peer_days = peer_replica(seed=1 + round_)
        ours_cpu, our_failures, our_days = trainsim_replicas(
            plan, args.replicas, round_ * args.replicas
        )
        best_peer, best_ours = min(best_peer, peer_cpu), min(best_ours, ours_cpu)
        print(
            f"{round_ + 1:>5} {peer_cpu:>10.2f} {ours_cpu:>11.3f} {peer_cpu / ours_cpu:>6.0f}×"
            f"   {peer_failures:.0f} / {our_failures:.0f}   {peer_days:.1f} / {our_days:.1f}"
        )
    print(
        f"best  {best_peer:>10.2f} {best_ours:>11.3f} {best_peer / best_ours:>6.0f}×"
        "   (CPU seconds per replica; failures and days: AIReSim / trainsim)"
    )


if __name__ == "__main__":
    main()
