"""Two engines (two checkouts) against each other, metric by metric, in distribution.

Usage:
    .venv/bin/python benchmarks/compare_engines.py --a /tmp/base [--b .] [--replicas 2000]
        [--random 20] [--soak-seed 13] [--only NAME]... [--json out.json]

For every shipped scenario (and `--random N` random scenarios of the identity soak),
each checkout runs `--replicas` replicas in its own process (its own `sim` on the
path; the two run side by side, one per core). For each numeric column of the replica
table the means are compared with z = (mean_B − mean_A) / sqrt(se_A² + se_B²); the
two engines use different seeds (`--seed`, `--seed + 1`) so the samples are
independent. The p-values of all metrics of all scenarios are corrected together
(Holm); a difference "survives" when its corrected p-value is below 0.0027 (3
standard errors, two-sided). It prints the worst |z| per scenario and every surviving
difference; exit code 1 when any survives. A surviving difference means one of the two
engines is wrong (or the change was meant to move that metric): find which against an
exact test before moving on.

Means within 1e-9 (relative) are equal: a column constant up to float rounding (the
ideal hours of finished replicas) has a near-zero variance and would give any two seeds a
huge |z|. A column that is constant in both runs is compared exactly: equal values give z = 0,
different ones an infinite |z|. Columns only one engine writes are listed, not tested.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
Z_LIMIT = 3.0
# means this close are equal: a column that is constant up to float rounding (ideal_hours of
# finished replicas, a sum of kept stretches) has a variance of ~1e-28 and would give any
# two seeds a huge |z|
REL_NOISE = 1e-9
ALPHA = math.erfc(Z_LIMIT / math.sqrt(2))  # two-sided p of 3 standard errors (0.0027)
# columns that identify a row or restate the seed, not outcomes of the simulation
NOT_METRICS = {"point", "replica", "seed"}


def worker(root: Path, documents: dict[str, dict], replicas: int, seed: int) -> dict:
    """In a checkout's own interpreter: per scenario and numeric column, n, mean, variance."""
    sys.path.insert(0, str(root))
    from sim.model.scenario import load_document
    from sim.model.scenario_set import ScenarioError
    from sim.runs.montecarlo import run

    out: dict[str, dict] = {}
    for name, document in documents.items():
        try:
            loaded = load_document(document, name)
        except ScenarioError as exc:
            out[name] = {"error": str(exc)}
            continue
        table = run(loaded, replicas, seed, 1, "serial", progress=False)
        stats = {}
        for column in table.columns:
            if column in NOT_METRICS or column.startswith(("scenario",)):
                continue
            values = table[column]
            if values.dtype == bool:
                values = values.astype(float)
            if values.dtype.kind not in "fiu":
                continue
            values = values.astype(float).dropna()
            if values.empty:
                continue
            stats[column] = {
                "n": int(values.size),
                "mean": float(values.mean()),
                "var": float(values.var(ddof=1)) if values.size > 1 else 0.0,
            }
        out[name] = stats
    return out


def shipped_documents(only: list[str]) -> dict[str, dict]:
    sys.path.insert(0, str(ROOT))
    from sim.model.safe_yaml import read_yaml

    docs = {}
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        if only and path.stem not in only:
            continue
        docs[path.stem] = read_yaml(path)
    return docs


def random_documents(count: int, seed: int) -> dict[str, dict]:
    """Random scenarios of the identity soak, as documents both checkouts can load."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from identity_soak import random_scenario

    from sim.model.scenario_set import ScenarioError

    rng, ops, gray = random.Random(seed), random.Random(seed + 1), random.Random(seed + 2)
    docs = {}
    i = 0
    while len(docs) < count:
        try:
            scenario = random_scenario(rng, ops, gray)
        except ScenarioError:  # refused at the edge (a fat tree too small), as the soak does
            continue
        docs[f"soak-{seed}-{i}"] = scenario.model_dump(
            mode="json", exclude_defaults=True, by_alias=True
        )
        i += 1
    return docs


def run_side(
    root: Path, documents: dict, replicas: int, seed: int, folder: Path
) -> subprocess.Popen:
    spec = folder / f"spec-{seed}.json"
    spec.write_text(json.dumps({"documents": documents, "replicas": replicas, "seed": seed}))
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.Popen(
        [sys.executable, __file__, "--worker", str(root), str(spec)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [0.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def z_score(a: dict, b: dict) -> float:
    se = math.sqrt(a["var"] / a["n"] + b["var"] / b["n"])
    diff = b["mean"] - a["mean"]
    if abs(diff) <= REL_NOISE * max(1.0, abs(a["mean"])):
        return 0.0  # float rounding (a sum of kept stretches), not a difference of engines
    if se == 0.0:
        return (
            0.0 if math.isclose(diff, 0.0, abs_tol=1e-12 * max(1.0, abs(a["mean"]))) else math.inf
        )
    return diff / se


def compare(stats_a: dict, stats_b: dict) -> tuple[list[dict], dict[str, str]]:
    rows, notes = [], {}
    for name in stats_a:
        a, b = stats_a[name], stats_b.get(name, {"error": "missing"})
        if "error" in a or "error" in b:
            notes[name] = f"not compared: A {a.get('error', 'ok')}; B {b.get('error', 'ok')}"
            continue
        only = sorted(set(a) ^ set(b))
        if only:
            notes[name] = "columns in one engine only: " + ", ".join(only)
        for column in sorted(set(a) & set(b)):
            z = z_score(a[column], b[column])
            rows.append(
                {
                    "scenario": name,
                    "metric": column,
                    "mean_a": a[column]["mean"],
                    "mean_b": b[column]["mean"],
                    "z": z,
                    "p": math.erfc(abs(z) / math.sqrt(2)) if math.isfinite(z) else 0.0,
                }
            )
    for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
        row["p_holm"] = adjusted
        row["survives"] = adjusted < ALPHA
    return rows, notes


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        spec = json.loads(Path(sys.argv[3]).read_text())
        print(
            json.dumps(worker(Path(sys.argv[2]), spec["documents"], spec["replicas"], spec["seed"]))
        )
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--a", type=Path, required=True, help="checkout of engine A (the reference)"
    )
    parser.add_argument(
        "--b", type=Path, default=ROOT, help="checkout of engine B (default: this one)"
    )
    parser.add_argument("--replicas", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1, help="A's seed; B uses seed + 1")
    parser.add_argument("--random", type=int, default=0, help="random soak scenarios to add")
    parser.add_argument("--soak-seed", type=int, default=13)
    parser.add_argument("--only", action="append", default=[], help="shipped scenario by name")
    parser.add_argument("--no-shipped", action="store_true")
    parser.add_argument("--json", type=Path, help="write every comparison here")
    args = parser.parse_args()

    documents = {} if args.no_shipped else shipped_documents(args.only)
    if args.random:
        documents.update(random_documents(args.random, args.soak_seed))
    with tempfile.TemporaryDirectory() as folder:
        side_a = run_side(args.a.resolve(), documents, args.replicas, args.seed, Path(folder))
        side_b = run_side(args.b.resolve(), documents, args.replicas, args.seed + 1, Path(folder))
        out_a, _ = side_a.communicate()
        out_b, _ = side_b.communicate()
    if side_a.returncode or side_b.returncode:
        print(f"a worker failed (A rc {side_a.returncode}, B rc {side_b.returncode})")
        return 2
    rows, notes = compare(json.loads(out_a), json.loads(out_b))

    print(f"A {args.a}  B {args.b}  {args.replicas} replicas each, {len(rows)} comparisons, Holm")
    print(f"{'scenario':<34} {'worst |z|':>9}  metric")
    for name in documents:
        mine = [r for r in rows if r["scenario"] == name]
        if not mine:
            print(f"{name:<34} {'-':>9}  {notes.get(name, 'no metrics')}")
            continue
        worst = max(mine, key=lambda r: abs(r["z"]))
        print(f"{name:<34} {abs(worst['z']):9.2f}  {worst['metric']}")
        if name in notes:
            print(f"{'':<34} {'':>9}  ({notes[name]})")
    survivors = [r for r in rows if r["survives"]]
    print(f"\n{len(survivors)} difference(s) survive the correction")
    for r in survivors:
        print(
            f"  {r['scenario']}: {r['metric']}  A {r['mean_a']:.6g}  B {r['mean_b']:.6g}  "
            f"z {r['z']:+.2f}  p_holm {r['p_holm']:.2g}"
        )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "notes": notes}, indent=1))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
