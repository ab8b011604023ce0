"""Fingerprints of every shipped scenario's replica table for a fixed seed: run it before
and after a change that must not move any number (a refactor), and compare.

Usage:
    .venv/bin/python benchmarks/fingerprint.py --save /tmp/before.json [--replicas 40]
    .venv/bin/python benchmarks/fingerprint.py --compare /tmp/before.json
Exit code 1 when any scenario's table differs (it names the columns that moved).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.model.scenario import load_scenario  # noqa: E402
from sim.runs.montecarlo import run  # noqa: E402


def column_hash(values: pd.Series) -> str:
    data = pd.util.hash_pandas_object(values, index=False).to_numpy().tobytes()
    return hashlib.sha256(data).hexdigest()[:16]


def fingerprints(replicas: int, seed: int) -> dict[str, dict[str, str]]:
    out = {}
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        loaded = load_scenario(path)
        table = run(loaded, replicas, seed, 1, "serial", progress=False)
        out[path.name] = {column: column_hash(table[column]) for column in table.columns}
        print(f"{path.name}: {len(table)} rows", file=sys.stderr)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=40)
    parser.add_argument("--seed", type=int, default=42)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path)
    group.add_argument("--compare", type=Path)
    args = parser.parse_args()
    if args.save:
        doc = {"replicas": args.replicas, "seed": args.seed}
        doc["scenarios"] = fingerprints(args.replicas, args.seed)
        args.save.write_text(json.dumps(doc, indent=1))
        print(f"saved fingerprints of {len(doc['scenarios'])} scenarios to {args.save}")
        return 0
    before = json.loads(args.compare.read_text())
    after = fingerprints(before["replicas"], before["seed"])
    moved = 0
    for name, columns in before["scenarios"].items():
        now = after.get(name, {})
        changed = sorted(c for c in columns if columns[c] != now.get(c))
        added = sorted(set(now) - set(columns))
        status = "identical" if not changed else f"DIFFERS in {', '.join(changed)}"
        if added:
            status += f" (new columns: {', '.join(added)})"
        moved += bool(changed)
        print(f"{name}: {status}")
    print(f"{len(before['scenarios']) - moved} of {len(before['scenarios'])} scenarios identical")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
