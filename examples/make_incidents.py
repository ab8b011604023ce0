"""Draws an incident log: by default 60 days of a 64-node cluster's failures, drawn with known
figures so that `trainsim fit` can be judged on it (docs/fitting.md lists them). The nodes
have been in service long before the window opens (as `trainsim fit` takes a log's nodes to
be): each class is a renewal process in its equilibrium, so its rate is the stated one from
the window's first day.

Prints the CSV on stdout, or writes it to --out; it never writes into the checkout unless
told to. examples/incidents.csv is its output with the defaults:

    .venv/bin/python examples/make_incidents.py --out examples/incidents.csv
    .venv/bin/python examples/make_incidents.py --nodes 128 --days 30 --seed 1 > my-log.csv
"""

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

NODES, GPUS_PER_NODE, DAYS, SEED = 64, 8, 60, 2028
START = "2026-03-01T00:00:00Z"
LEMONS = [7, 23, 51]  # nodes that fail 6x as often in the node classes
# name, scope, rate per 1,000 GPU-days, Weibull shape, lemon multiplier, mean repair hours
CLASSES = (
    ("gpu_xid", "gpu", 3.0, 1.0, 6.0, 30.0),
    ("host", "node", 1.5, 0.7, 6.0, 48.0),
    ("nccl_hang", "job", 0.6, 1.0, 1.0, None),
)
REPAIR_SIGMA = 0.8  # lognormal repairs


def draw(
    rng: np.random.Generator,
    nodes: int = NODES,
    gpus_per_node: int = GPUS_PER_NODE,
    days: float = DAYS,
    lemons: Sequence[int] = LEMONS,
) -> pd.DataFrame:
    """One log of the cluster: hours since the window's start (`t`), node, class, scope and
    repair hours, in time order. `lemons`: the indices of the nodes that fail more often."""
    hours = days * 24
    lemon = np.zeros(nodes, bool)
    lemon[list(lemons)] = True
    rows = []
    for name, scope, rate, shape, multiplier, repair in CLASSES:
        if scope == "job":
            mean = 24 / (rate * nodes * gpus_per_node / 1000)
            t = 0.0
            while (t := t + rng.exponential(mean)) <= hours:
                rows.append((t, "", name, scope, np.nan))
            continue
        mean = 24 / (rate * gpus_per_node / 1000)  # a node's mean time between failures
        scale = mean / math.gamma(1 + 1 / shape)
        for node in range(nodes):
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


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text}")
    return value


def _days(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of days, not {text}")
    return value


def _nodes_list(text: str) -> list[int]:
    try:
        found = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected node indices like 7,23,51, not {text}"
        ) from None
    return found


def _start(text: str) -> pd.Timestamp:
    try:
        stamp = pd.Timestamp(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO 8601 time, not {text}") from None
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def parser() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(
        prog="make_incidents.py",
        description="Draw an incident log with known failure rates (the format trainsim fit "
        "reads): CSV on stdout, or in --out.",
    )
    options.add_argument("--out", type=Path, metavar="PATH",
                         help="write the CSV here (default: stdout)")  # fmt: skip
    options.add_argument("--seed", type=int, default=SEED, help=f"[{SEED}]")
    options.add_argument("--nodes", type=_count, default=NODES, help=f"[{NODES}]")
    options.add_argument("--gpus-per-node", type=_count, default=GPUS_PER_NODE,
                         help=f"[{GPUS_PER_NODE}]")  # fmt: skip
    options.add_argument("--days", type=_days, default=DAYS, help=f"the window [{DAYS}]")
    options.add_argument("--start", type=_start, default=_start(START),
                         help=f"the window's start, ISO 8601 [{START}]")  # fmt: skip
    options.add_argument(
        "--lemons", type=_nodes_list, default=LEMONS, metavar="I,J,...",
        help="indices of the nodes failing 6x as often in the node classes; '' for none "
        f"[{','.join(map(str, LEMONS))}]",
    )  # fmt: skip
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parser()
    args = options.parse_args(argv)
    if any(not 0 <= node < args.nodes for node in args.lemons):
        options.error(f"--lemons: node indices run from 0 to {args.nodes - 1} (--nodes)")
    table = draw(
        np.random.default_rng(args.seed), args.nodes, args.gpus_per_node, args.days, args.lemons
    )
    table["time"] = (args.start + pd.to_timedelta(table["t"], unit="h")).dt.strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    columns = ["time", "node", "class", "scope", "repair_hours"]
    if args.out is None:
        table[columns].to_csv(sys.stdout, index=False)
        return 0
    try:
        table[columns].to_csv(args.out, index=False)
    except OSError as error:
        options.exit(
            2, f"make_incidents.py: error: cannot write {args.out}: {error.strerror or error}\n"
        )
    print(args.out, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
