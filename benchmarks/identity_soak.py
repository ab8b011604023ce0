"""Soak test of the time accounting: thousands of random small scenarios, every feature on.

Usage: .venv/bin/python benchmarks/identity_soak.py [--runs 4000] [--seed 13] [--no-ops]
           [--no-gray] [--repro DIR] [--show 5]
       .venv/bin/python benchmarks/identity_soak.py --replay DIR/violation_<run>.json

Each run draws a random tiny scenario (nodes, spares, interval, sync/async, in-memory
level, shared data tier, backups, every failure scope including fabric and storage,
restart/elastic, horizon) and, unless --no-ops, the operations features (cold and
preemptible pools, lemons, the repair pipeline with technicians, RMA, retirement,
misdiagnosis and false fixes, classes that do not strike idle nodes or are not the
node's fault, planned maintenance, health checks) and, unless --no-gray, the gray
failures and data faults (stragglers, loss spikes rolling back several checkpoints,
silent data corruption, corrupt checkpoints with and without validation, on-call
waits). It checks that wall = ideal + slowdown + lost_work + checkpoint_stall +
downtime, that downtime and the cost each equal the sum of their parts, that no
bucket or part is negative, that
a finished run kept exactly total_steps of ideal compute, that the replica runs at all
(node conservation is asserted inside the engine), and that the operations counts are
consistent (retired within the fleet, lemon failures within failures, ...; reported
apart as "counts", they do not touch the identity). The
hypothesis property test does the same in the suite with fewer examples; this finds
the rare paths.

The operations and gray draws come from their own random streams, so --no-ops --no-gray
draws exactly the scenarios of the soak before the operations layer.

--repro DIR writes each violation's scenario, replica seed and problems to a JSON file;
--replay reruns one and prints its record.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.engine import build_plan, simulate_replica  # noqa: E402
from sim.engine.ledger import DOWNTIME_PARTS  # noqa: E402
from sim.model.scenario_set import ScenarioError  # noqa: E402
from sim.model.schema import Scenario  # noqa: E402
from sim.runs.montecarlo import COLUMNS, COUNT_COLUMNS  # noqa: E402
from tests.conftest import COST_PARTS, as_class, identity_error, tiny  # noqa: E402

SCOPES = ["gpu", "node", "node", "job", "link", "switch", "storage"]
COUNTS = "counts: "  # the prefix of a problem with the counters, not with the time identity
# record fields summed over the runs: evidence that the drawn features did something
ACTIVITY = ["finished", *(c for c in COLUMNS if c in COUNT_COLUMNS)]


def random_scenario(
    rng: random.Random, ops: random.Random | None = None, gray: random.Random | None = None
) -> Scenario:
    """A tiny scenario from `rng` (the draws of the soak before the operations layer);
    with `ops`, the operations features drawn from that stream on top; with `gray`, the
    gray failures and data faults from that one."""
    classes = [
        as_class(
            j,
            {
                "scope": rng.choice(SCOPES),
                "mtbf_hours": rng.uniform(0.02, 5),
                "distribution": "exponential",
                "detect_minutes": rng.uniform(0, 5),
                "repair_hours": rng.uniform(0.01, 2),
                "replace": rng.random() < 0.5,
                "loses_data": rng.random() < 0.5,
            },
        )
        for j in range(rng.randint(0, 3))
    ]
    memory = rng.choice([None, rng.randint(1, 60)])
    storage = {
        "data_tier": "shared" if rng.random() < 0.5 and memory is None else "separate",
        "data_bytes_per_token": rng.uniform(0, 4e6),
        "background_load": rng.uniform(0, 0.9),
    }
    every = rng.choice([0, 0, 1, 2, 3])
    if every:
        storage["backup"] = {"kind": "object", "every": every}
    sections: dict[str, Any] = dict(
        cluster=tiny_cluster(rng),
        checkpoint={
            "interval_steps": rng.randint(1, 400),
            "mode": rng.choice(["sync", "async"]),
            "snapshot_GB_s_per_node": rng.uniform(0.5, 50),
            "memory_every_steps": memory,
        },
        failures=classes,
        recovery={
            "policy": rng.choice(["restart", "elastic"]),
            "elastic_min_fraction": rng.uniform(0.1, 1),
            "restart_minutes": 1,
        },
        simulation={"horizon_days": rng.uniform(0.2, 20) / 24},
        network={
            "switch_radix": rng.choice([4, 8, 64]),
            "placement": rng.choice(["contiguous", "scattered"]),
        },
        storage=storage,
    )
    if ops is not None:
        add_operations(ops, sections)
    if gray is not None:
        add_gray(gray, sections)
    return tiny(**sections)


def tiny_cluster(rng: random.Random) -> dict[str, int]:
    """1-8 nodes of 1, 2 or 4 GPUs and 0-3 warm spares."""
    return {
        "nodes": rng.randint(1, 8),
        "gpus_per_node": rng.choice([1, 2, 4]),
        "spare_nodes": rng.randint(0, 3),
    }


def add_gray(rng: random.Random, s: dict[str, Any]) -> None:
    """Stragglers, loss spikes, silent corruption, corrupt checkpoints (with and without
    validation) and on-call waits, at rates that make them happen within a tiny run."""
    if rng.random() < 0.4:
        s["stragglers"] = {
            "rate_per_1k_gpu_day": rng.uniform(100, 20000),
            "slowdown": rng.uniform(0.05, 0.6),
            "slowdown_max": rng.choice([None, 0.7]),
            "detect_hours": rng.choice([None, rng.uniform(0, 1)]),
            "detect_threshold": rng.choice([0.0, rng.uniform(0, 0.5)]),
            "clear_hours": rng.choice([None, rng.uniform(0.01, 1)]),
            "repair_hours": rng.uniform(0.01, 1),
        }
    needs_human = False
    for fc in s["failures"]:
        if fc["scope"] in ("gpu", "node", "job") and rng.random() < 0.2:
            fc["silent"] = True
            fc.pop("detect_minutes", None)
            fc["detect_hours"] = rng.uniform(0, 0.5)
        elif rng.random() < 0.3:
            fc["rollback_checkpoints"] = rng.randint(1, 4)
        if rng.random() < 0.2:
            fc["needs_human"] = needs_human = True
    if needs_human or rng.random() < 0.2:
        s["oncall"] = {
            "response_minutes": rng.uniform(0, 30),
            "night_response_minutes": rng.uniform(0, 90),
            "weekend_response_minutes": rng.uniform(0, 180),
        }
        s["simulation"]["start_weekday"] = rng.choice(["monday", "friday", "saturday"])
        s["simulation"]["start_hour"] = rng.uniform(0, 23.9)
    if rng.random() < 0.4:
        s["checkpoint"]["corrupt_prob"] = rng.uniform(0.01, 0.5)
        s["checkpoint"]["validate"] = rng.random() < 0.5
        s["checkpoint"]["keep_last"] = rng.randint(1, 5)


def add_operations(rng: random.Random, s: dict[str, Any]) -> None:
    """The operations features, in ranges that make them happen within a tiny run
    (horizons of 0.2-20 hours)."""
    # longer runs (ideal 17 minutes to ~6 hours) so that repairs, retirements, checks and
    # maintenance windows happen within them
    s["model"] = {"tokens": 1e6 * rng.choice([1.0, rng.uniform(1, 20)])}
    cluster = s["cluster"]
    if rng.random() < 0.5:
        cluster["pool_nodes"] = rng.randint(1, 3)
        cluster["host_selection_minutes"] = rng.uniform(0, 10)
    if rng.random() < 0.3:
        cluster["preemptible_nodes"] = rng.randint(1, 3)
        cluster["preemption_minutes"] = rng.uniform(0, 30)
    if rng.random() < 0.6:
        cluster["lemon_fraction"] = rng.uniform(0.05, 0.6)
        cluster["lemon_rate_multiplier"] = rng.choice([1.0, rng.uniform(1, 20)])
    for fc in s["failures"]:
        if rng.random() < 0.3:
            fc["while_idle"] = False
        if fc["scope"] in ("gpu", "node") and rng.random() < 0.3:
            fc["node_attributable"] = rng.random() < 0.5
        elif rng.random() < 0.1:
            fc["node_attributable"] = False
    if rng.random() < 0.6:
        repair: dict[str, Any] = {
            "auto_minutes": rng.uniform(0.5, 60),
            "escalate_prob": rng.choice([0.0, 1.0, rng.random()]),
            "auto_false_fix_prob": rng.choice([0.0, rng.random()]),
            "manual_hours": rng.uniform(0.02, 3),
            "manual_false_fix_prob": rng.choice([0.0, rng.random()]),
            "rma_after_manual_repairs": rng.randint(1, 3),
            "rma_days": rng.uniform(0.005, 0.5),
            "return_to": rng.choice(["spares", "origin"]),
            "misdiagnosis_prob": rng.choice([0.0, rng.uniform(0, 0.5)]),
        }
        if rng.random() < 0.6:
            repair["technicians"] = rng.randint(1, 3)
        if rng.random() < 0.5:
            repair["retire_after_failures"] = rng.randint(1, 4)
            repair["retire_window_days"] = rng.uniform(0.01, 2)
        s["repair"] = repair
    if rng.random() < 0.4:
        s["maintenance"] = {
            "every_days": rng.uniform(0.003, 0.5),
            "duration_hours": rng.uniform(0.01, 1),
        }
    if rng.random() < 0.4:
        s["health_checks"] = {
            "every_hours": rng.uniform(0.05, 3),
            "cost_minutes": rng.uniform(0, 10),
            "catch_prob": rng.choice([1.0, rng.random()]),
            "lead_hours": rng.uniform(0.05, 5),
        }
    # lasting faults that failures leave, and which warm spare goes in first
    cluster["spare_order"] = rng.choice(["oldest", "newest", "random"])
    for fc in s["failures"]:
        attributable = fc.get("node_attributable", fc["scope"] in ("gpu", "node"))
        if attributable and rng.random() < 0.5:
            fc["fault_prob"] = rng.choice([1.0, rng.random()])


def problems_of(plan, r) -> list[str]:
    """What is wrong with one replica's record (empty when nothing is)."""
    out = []
    buckets = {
        "ideal": r.ideal_hours,
        "slowdown": r.slowdown_hours,
        "lost_work": r.lost_work_hours,
        "checkpoint_stall": r.checkpoint_stall_hours,
        "downtime": r.downtime_hours,
    }
    # the parts of downtime and of the cost (they sum to their parents: identity_error)
    buckets.update(
        {part: getattr(r, part.removesuffix("_s") + "_hours") for part in DOWNTIME_PARTS}
    )
    buckets.update({column: getattr(r, column) for column in COST_PARTS})
    err = identity_error(r)
    if err > 1e-9:
        out.append(f"identity off by {err:.3g} (relative)")
    for name, hours in buckets.items():
        if hours < 0:
            out.append(f"negative {name} ({hours * 3600:.6g} s)")
    if r.finished and abs(r.ideal_hours * 3600 - plan.total_steps * plan.step_s) >= 1e-6:
        out.append(
            f"finished with ideal {r.ideal_hours * 3600:.9g} s != total_steps*step_s "
            f"{plan.total_steps * plan.step_s:.9g} s"
        )
    # the operations counts (getattr: a record without them predates the layer)
    retired = getattr(r, "nodes_retired", 0)
    if retired > getattr(plan, "fleet_nodes", plan.nodes + plan.spare_nodes) - plan.nodes:
        out.append(COUNTS + f"{retired} retired leaves fewer nodes than the job's {plan.nodes}")
    if getattr(r, "lemons_retired", 0) > retired:
        out.append(COUNTS + f"lemons_retired {r.lemons_retired} > nodes_retired {retired}")
    if getattr(r, "failures_lemon", 0) > r.failures:
        out.append(COUNTS + f"failures_lemon {r.failures_lemon} > failures {r.failures}")
    if getattr(r, "preemptions", 0) > getattr(r, "nodes_from_pool", 0):
        out.append(COUNTS + f"preemptions {r.preemptions} > nodes_from_pool {r.nodes_from_pool}")
    if getattr(r, "nodes_drained", 0) > r.nodes_replaced:
        out.append(COUNTS + f"nodes_drained {r.nodes_drained} > nodes_replaced {r.nodes_replaced}")
    if r.node_wait_hours > r.downtime_hours * (1 + 1e-9) + 1e-12:
        out.append(
            COUNTS + f"node_wait {r.node_wait_hours:.6g} h > downtime {r.downtime_hours:.6g} h"
        )
    if r.failures != sum(r.failures_by_class.values()):
        out.append(COUNTS + "failures != sum of failures_by_class")
    return out


def run_one(scenario: Scenario, seed: int):
    plan = build_plan(scenario)
    try:
        r = simulate_replica(plan, 0, seed)
    except Exception as exc:  # a crash (e.g. "nodes were not conserved") is a violation too
        return plan, None, [f"crashed: {type(exc).__name__}: {exc}"]
    return plan, r, problems_of(plan, r)


def features(scenario: Scenario) -> list[str]:
    """Which features a scenario exercises (short names, counted in the summary)."""
    c, ck = scenario.cluster, scenario.checkpoint
    repair = getattr(scenario, "repair", None)
    flags = {
        "elastic": scenario.recovery.policy == "elastic",
        "async": ck.mode == "async",
        "memory": ck.memory_every_steps is not None,
        "backup": scenario.storage.backup is not None,
        "cold_pool": getattr(c, "pool_nodes", 0) > 0,
        "preemptible": getattr(c, "preemptible_nodes", 0) > 0,
        "lemons": getattr(c, "lemon_fraction", 0) > 0,
        "repair": repair is not None,
        "technicians": repair is not None and repair.technicians is not None,
        "retirement": repair is not None and repair.retire_after_failures is not None,
        "misdiagnosis": repair is not None and repair.misdiagnosis_prob > 0,
        "false_fixes": repair is not None
        and (repair.auto_false_fix_prob > 0 or repair.manual_false_fix_prob > 0),
        "return_to_origin": repair is not None and repair.return_to == "origin",
        "lasting_faults": any(getattr(f, "fault_prob", 0) > 0 for f in scenario.failures),
        "random_spares": getattr(c, "spare_order", "oldest") == "random",
        "maintenance": getattr(scenario, "maintenance", None) is not None,
        "health_checks": getattr(scenario, "health_checks", None) is not None,
        "while_idle_false": any(not getattr(f, "while_idle", True) for f in scenario.failures),
        "not_attributable": any(
            getattr(f, "node_attributable", None) is False for f in scenario.failures
        ),
        "stragglers": getattr(scenario, "stragglers", None) is not None,
        "loss_spikes": any(getattr(f, "rollback_checkpoints", 1) > 1 for f in scenario.failures),
        "silent": any(getattr(f, "silent", False) for f in scenario.failures),
        "corrupt": getattr(ck, "corrupt_prob", 0) > 0,
        "validate": getattr(ck, "validate_writes", False),
        "oncall": getattr(scenario, "oncall", None) is not None,
    }
    return [name for name, on in flags.items() if on]


def describe(scenario: Scenario) -> str:
    c = scenario.cluster
    scopes = "/".join(f.scope for f in scenario.failures) or "no-failures"
    return " ".join([f"{c.nodes}n+{c.spare_nodes}s", scopes, *features(scenario)])


def replay(path: Path) -> int:
    saved = json.loads(path.read_text())
    scenario = Scenario.model_validate(saved["scenario"])
    plan, r, problems = run_one(scenario, saved["seed"])
    print(f"replica 0, seed {saved['seed']}: {describe(scenario)}")
    if r is not None:
        for key, value in r.row().items():
            print(f"  {key}: {value}")
    print("problems:", problems or "none")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--no-ops", action="store_true", help="without the operations features")
    parser.add_argument(
        "--no-gray", action="store_true", help="without stragglers, data faults and on-call"
    )
    parser.add_argument("--repro", type=Path, help="write each violation's reproducer here")
    parser.add_argument("--show", type=int, default=5, help="print the scenario of this many")
    parser.add_argument("--replay", type=Path, help="rerun one reproducer file")
    args = parser.parse_args()
    if args.replay:
        return replay(args.replay)
    rng = random.Random(args.seed)
    ran = refused = 0
    bad: list[int] = []  # the time identity (or a crash)
    counts: list[int] = []  # the counters only
    used: dict[str, int] = {}
    totals: dict[str, int] = {}  # what the features did, summed over the runs
    start = time.perf_counter()
    for i in range(args.runs):
        ops = None if args.no_ops else random.Random(f"{args.seed}-ops-{i}")
        gray = None if args.no_gray else random.Random(f"{args.seed}-gray-{i}")
        try:
            scenario = random_scenario(rng, ops, gray)
        except ScenarioError:
            refused += 1
            continue  # refused at the edge (e.g. a fat tree too small for the nodes)
        _, r, problems = run_one(scenario, i)
        ran += 1
        for key in ACTIVITY:
            value = getattr(r, key, 0) if r is not None else 0
            totals[key] = totals.get(key, 0) + int(value)
        for feature in features(scenario):
            used[feature] = used.get(feature, 0) + 1
        if not problems:
            continue
        only_counts = all(p.startswith(COUNTS) for p in problems)
        (counts if only_counts else bad).append(i)
        label = "COUNTS" if only_counts else "VIOLATION"
        print(
            f"{label} run {i} (replica 0, seed {i}): {'; '.join(problems)} [{describe(scenario)}]"
        )
        if args.repro:
            args.repro.mkdir(parents=True, exist_ok=True)
            target = args.repro / f"violation_{i}.json"
            target.write_text(
                json.dumps(
                    {
                        "seed": i,
                        "problems": problems,
                        "scenario": scenario.model_dump(
                            mode="json", exclude_none=True, by_alias=True
                        ),
                    },
                    indent=1,
                )
            )
            print(f"  reproduce: .venv/bin/python benchmarks/identity_soak.py --replay {target}")
        if len(bad) + len(counts) <= args.show:
            print(f"  scenario: {scenario.model_dump_json(exclude_defaults=True)}")
    elapsed = time.perf_counter() - start
    print(
        f"identity soak: {ran} runs ({refused} refused at the edge) in {elapsed:.1f} s, "
        f"{len(bad)} violations of the identity, {len(counts)} of the counters"
    )
    print("runs per feature: " + ", ".join(f"{k} {v}" for k, v in used.items()))
    print("activity (summed): " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    return 1 if bad or counts else 0


if __name__ == "__main__":
    sys.exit(main())
