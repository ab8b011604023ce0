"""Peak memory of `trainsim run` against the replicas: the main process must not grow
with the table (issue target: 200,000 replicas at most 20% above 20,000).

Usage: .venv/bin/python benchmarks/bench_memory.py [--sizes 20000,200000]
           [--scenario scenarios/llama70b-1k.yaml] [--workers 2] [--no-figures]
           [--root PATH] [--json PATH]

Each size runs `trainsim run SCENARIO --replicas N --workers W` (figures on unless
--no-figures) in a subprocess of its own, into a temporary --out. The subprocess runs
the command in-process (`sim.cli.commands.main`) and, as it exits, reports its own peak RSS
(`getrusage(RUSAGE_SELF).ru_maxrss`): the main process only, not its workers. The
workers' peak (`RUSAGE_CHILDREN` of that subprocess: the largest of its reaped
children) is reported beside it. The ratio is the largest size's main peak over the
smallest's.

--root measures another checkout (e.g. a git worktree of an older commit): its `sim`
package and scenarios are used.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 1.2  # the largest size's peak RSS at most 20% above the smallest's

# Run in the subprocess: the command in-process, then its peak RSS and its children's on
# the last line of stderr (ru_maxrss is in KiB on Linux, bytes on macOS).
CHILD = r"""
import json, resource, sys
sys.path.insert(0, sys.argv[1])
from sim.cli.commands import main
def peak(who):
    kib = resource.getrusage(who).ru_maxrss
    return kib / 1024 / (1024 if sys.platform == "darwin" else 1)
code = 0
try:
    main(sys.argv[2:])
except SystemExit as stop:
    code = stop.code if isinstance(stop.code, int) else 1
print("\nBENCH_MEMORY " + json.dumps({
    "main_mb": peak(resource.RUSAGE_SELF), "workers_mb": peak(resource.RUSAGE_CHILDREN),
}), file=sys.stderr)
sys.exit(code)
"""


def measure(root: Path, scenario: str, replicas: int, workers: int, figures: bool) -> dict:
    """One run's peak RSS (MB) of the main process and of its largest worker, and its time."""
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as out:
        args = [
            "run", scenario, "--replicas", str(replicas), "--workers", str(workers),
            "--out", out, "--no-progress", "--figures" if figures else "--no-figures",
        ]  # fmt: skip
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(root), *args],
            cwd=root,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        seconds = time.monotonic() - started
    lines = [line for line in done.stderr.splitlines() if line.startswith("BENCH_MEMORY ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(
            f"trainsim {' '.join(args)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    return {"replicas": replicas, "seconds": round(seconds, 1), **json.loads(lines[-1][13:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,200000", help="replica counts, comma-separated")
    parser.add_argument("--scenario", default="scenarios/llama70b-1k.yaml")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-figures", action="store_true")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--json", type=Path, help="also write the results here")
    options = parser.parse_args()
    sizes = sorted(int(s.replace("_", "")) for s in options.sizes.split(","))
    root = options.root.resolve()
    rows = []
    print(f"trainsim run {options.scenario} --workers {options.workers} "
          f"({'no figures' if options.no_figures else 'with figures'}), root {root}")  # fmt: skip
    print(f"{'replicas':>10}  {'main peak RSS':>14}  {'worker peak':>12}  {'time':>8}")
    for replicas in sizes:
        row = measure(root, options.scenario, replicas, options.workers, not options.no_figures)
        rows.append(row)
        print(
            f"{replicas:>10,}  {row['main_mb']:>11.1f} MB  {row['workers_mb']:>9.1f} MB  "
            f"{row['seconds']:>6.1f} s",
            flush=True,
        )
    ratio = rows[-1]["main_mb"] / rows[0]["main_mb"]
    verdict = "meets" if ratio <= TARGET_RATIO else "misses"
    print(
        f"main peak RSS {rows[-1]['replicas']:,} / {rows[0]['replicas']:,} replicas: "
        f"{ratio:.3f} ({verdict} the target <= {TARGET_RATIO:g})"
    )
    if options.json:
        options.json.write_text(json.dumps({"rows": rows, "ratio": ratio}, indent=2) + "\n")


if __name__ == "__main__":
    main()
