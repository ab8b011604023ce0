"""A log against its fleet run back, measured without trainsim's code: the input log (CSV,
ISO 8601 times or hours) and the incidents.parquet of `trainsim run fleet.yaml --incidents`,
each read with pandas alone, the same measures computed on both, and the tolerances of
docs/fitting.md applied to the replicas' mean. An independent reading of what
`trainsim fit --check` prints.

    python benchmarks/fleet_check.py examples/lanl-system20.csv RUN_DIR \\
        --start 2001-12-01T00:00:00 --end 2005-09-10T00:00:00 --nodes 512

RUN_DIR is the run directory `trainsim run DIR/fleet.yaml --incidents` printed.
Exit 0 when every judged measure is within its tolerance, 1 when one is not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

DAY_H = 24.0


def read_input(path: Path, start: str | None, end: str | None) -> tuple[pd.DataFrame, float]:
    """The input log as hours since the window's start (ISO times need --start)."""
    table = pd.read_csv(path)
    raw = table["time"]
    numeric = pd.to_numeric(raw, errors="coerce")
    if numeric.notna().all():
        hours = numeric.astype(float)
        window = float(end) - float(start or 0) if end else float(hours.max())
        hours = hours - float(start or 0)
    else:
        t0 = pd.Timestamp(start)
        stamps = pd.to_datetime(raw)
        hours = (stamps - t0) / pd.Timedelta(hours=1)
        window = (pd.Timestamp(end) - t0) / pd.Timedelta(hours=1)
    out = pd.DataFrame(
        {
            "hours": hours.to_numpy(dtype=float),
            "node": table["node"].to_numpy(),
            "class": table["class"].to_numpy() if "class" in table else "all",
            "repair": table["repair_hours"].to_numpy(dtype=float)
            if "repair_hours" in table
            else np.nan,
        }
    )
    return out, float(window)


def measures(log: pd.DataFrame, nodes: int, window: float) -> dict[str, float]:
    """Failures per class and per quarter, node-hours down, and over the named nodes: the
    share on the 10% most-failing, the share never failing, the share within a day of the
    same node's previous failure."""
    out: dict[str, float] = {}
    for name, group in log.groupby("class"):
        out[f"failures: {name}"] = float(len(group))
    out["node-hours down"] = float(np.nansum(log["repair"]))
    quarter = np.minimum((log["hours"] / (window / 4)).astype(int), 3)
    for q in range(4):
        out[f"failures in quarter {q + 1}"] = float(np.count_nonzero(quarter == q))
    named = log[log["node"] >= 0]
    per_node = named.groupby("node").size()
    counts = np.zeros(max(nodes, int(named["node"].max()) + 1 if len(named) else 0))
    counts[per_node.index.to_numpy(dtype=int)] = per_node.to_numpy()
    ranked = np.sort(counts)[::-1]
    out["share on the 10% worst nodes"] = ranked[: max(1, round(len(counts) / 10))].sum() / (
        ranked.sum()
    )
    out["share of nodes never failing"] = float(np.mean(counts == 0))
    ordered = named.sort_values(["node", "hours"])
    previous = ordered.groupby("node")["hours"].shift()
    out["share within a day of the previous"] = float(
        np.mean((ordered["hours"] - previous).to_numpy() <= DAY_H)
    )
    return out


def tolerance(key: str, logged: float) -> tuple[float | None, float | None]:
    """(relative, points) allowed, as docs/fitting.md states them; None: not judged."""
    if key.startswith("failures: "):
        return (0.15, None) if logged >= 20 else (None, None)
    if key == "node-hours down" or key.startswith("failures in quarter"):
        return 0.25, None
    if key in ("share on the 10% worst nodes", "share of nodes never failing"):
        return None, 8.0
    return 0.35, 2.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="the input log (CSV)")
    parser.add_argument("run", type=Path, help="the run directory of fleet.yaml --incidents")
    parser.add_argument("--start", help="the window's start (ISO 8601, or hours)")
    parser.add_argument("--end", help="the window's end (ISO 8601, or hours)")
    parser.add_argument("--nodes", type=int, required=True, help="the log's fleet")
    args = parser.parse_args(argv)

    log, window = read_input(args.log, args.start, args.end)
    runs = pd.read_parquet(args.run / "incidents.parquet")
    logged = measures(log, args.nodes, window)
    model = []
    for _, replica in runs.groupby("replica"):
        table = pd.DataFrame(
            {
                "hours": replica["time"].to_numpy(dtype=float),
                "node": replica["node"].to_numpy(),
                "class": replica["class"].to_numpy(),
                "repair": replica["repair_hours"].to_numpy(dtype=float),
            }
        )
        model.append(measures(table, args.nodes, window))
    print(f"{'measure':<38} {'log':>10} {'model':>10}  verdict ({len(model)} replicas)")
    off = 0
    for key, value in logged.items():
        mean = float(np.mean([m.get(key, 0.0) for m in model]))
        relative, points = tolerance(key, value)
        if relative is None and points is None:
            verdict = "-"
        else:
            ok = relative is not None and value > 0 and abs(mean / value - 1) <= relative
            ok = ok or (points is not None and abs(mean - value) * 100 <= points)
            verdict = "within" if ok else "OFF"
            off += not ok
        shown = (f"{value:.1%}", f"{mean:.1%}") if key.startswith("share") else (
            f"{value:,.0f}", f"{mean:,.0f}")  # fmt: skip
        print(f"{key:<38} {shown[0]:>10} {shown[1]:>10}  {verdict}")
    return 1 if off else 0


if __name__ == "__main__":
    sys.exit(main())
