"""Writes incidents.csv: 60 days of a 64-node cluster's failures, drawn with known figures so
that `trainsim fit` can be judged on it (docs/fitting.md lists them).

Run: .venv/bin/python examples/make_incidents.py
"""

import math
from pathlib import Path

import numpy as np
import pandas as pd

NODES, GPUS_PER_NODE, DAYS = 64, 8, 60
START = pd.Timestamp("2026-03-01T00:00:00Z")
LEMONS = [7, 23, 51]  # nodes that fail 6x as often in the node classes
# name, scope, rate per 1,000 GPU-days, Weibull shape, lemon multiplier, mean repair hours
CLASSES = (
    ("gpu_xid", "gpu", 3.0, 1.0, 6.0, 30.0),
    ("host", "node", 1.5, 0.7, 6.0, 48.0),
    ("nccl_hang", "job", 0.6, 1.0, 1.0, None),
)
REPAIR_SIGMA = 0.8  # lognormal repairs


def main() -> Path:
    rng = np.random.default_rng(2026)
    hours = DAYS * 24
    lemon = np.zeros(NODES, bool)
    lemon[LEMONS] = True
    rows = []
    for name, scope, rate, shape, multiplier, repair in CLASSES:
        if scope == "job":
            mean = 24 / (rate * NODES * GPUS_PER_NODE / 1000)
            t = 0.0
            while (t := t + rng.exponential(mean)) <= hours:
                rows.append((t, "", name, scope, np.nan))
            continue
        mean = 24 / (rate * GPUS_PER_NODE / 1000)  # a node's mean time between failures
        scale = mean / math.gamma(1 + 1 / shape)
        for node in range(NODES):
            t = 0.0
            while (
                t := t + scale * rng.weibull(shape) / (multiplier if lemon[node] else 1)
            ) <= hours:
                hours_to_repair = rng.lognormal(
                    math.log(repair) - REPAIR_SIGMA**2 / 2, REPAIR_SIGMA
                )
                rows.append((t, f"gpu-node-{node:03d}", name, scope, round(hours_to_repair, 1)))
    table = pd.DataFrame(rows, columns=["t", "node", "class", "scope", "repair_hours"])
    table = table.sort_values("t")
    table["time"] = (START + pd.to_timedelta(table["t"], unit="h")).dt.strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    path = Path(__file__).with_name("incidents.csv")
    table[["time", "node", "class", "scope", "repair_hours"]].to_csv(path, index=False)
    return path


if __name__ == "__main__":
    print(main())
