"""Writes incidents.csv: 60 days of a 64-node cluster's failures, drawn with known figures so
that `trainsim fit` can be judged on it (docs/fitting.md lists them). The nodes have been in
service long before the window opens (as `trainsim fit` takes a log's nodes to be): each
class is a renewal process in its equilibrium, so its rate is the stated one from the
window's first day.

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


def draw(rng: np.random.Generator) -> pd.DataFrame:
    """One log of the cluster: hours since the window's start (`t`), node, class, scope and
    repair hours, in time order."""
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
            pace = multiplier if lemon[node] else 1
            # the nodes are long in service: the first failure comes after a residual life of
            # the renewal process's equilibrium (U times a length-biased life), then whole lives
            t = rng.random() * scale * rng.gamma(1 + 1 / shape) ** (1 / shape) / pace
            while t <= hours:
                hours_to_repair = rng.lognormal(
                    math.log(repair) - REPAIR_SIGMA**2 / 2, REPAIR_SIGMA
                )
                rows.append((t, f"gpu-node-{node:03d}", name, scope, round(hours_to_repair, 1)))
                t += scale * rng.weibull(shape) / pace
    table = pd.DataFrame(rows, columns=["t", "node", "class", "scope", "repair_hours"])
    return table.sort_values("t")


def main() -> Path:
    table = draw(np.random.default_rng(2028))
    table["time"] = (START + pd.to_timedelta(table["t"], unit="h")).dt.strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    path = Path(__file__).with_name("incidents.csv")
    table[["time", "node", "class", "scope", "repair_hours"]].to_csv(path, index=False)
    return path


if __name__ == "__main__":
    print(main())
