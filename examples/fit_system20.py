"""LANL's system 20 from its failure log: the fit, the check of its fleet run back, and what
the fitted trend means for a cluster just brought up. Every number docs/fitting.md gives
for system 20 is printed here.

    .venv/bin/python examples/fit_system20.py [--replicas 20] [--seed 0]

The log (examples/lanl-system20.csv, examples/README-lanl-system20.md) covers the
system's life: 512 nodes from 2001-12-01 to 2005-09-10. Nothing is written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.data import fit, logs
from sim.data.fleet_check import check
from sim.engine.aging import FleetAge

LOG = Path(__file__).resolve().parent / "lanl-system20.csv"
START, END, NODES = "2001-12-01T00:00:00", "2005-09-10T00:00:00", 512
DAY_H = 24.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=20, help="replicas of the check")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    log = logs.read_log(LOG, NODES, 1, START, END)
    result = fit.fit_log(log, seed=args.seed)
    print(f"window: {log.window_hours:,.0f} h = {log.window_hours / DAY_H:,.0f} days, "
          f"{len(log.events):,} failures on {NODES} nodes")  # fmt: skip

    trend = result.trend
    if trend is not None:
        b = trend.beta
        print(f"trend: beta {b.value:.3f} [{b.low:.3f}, {b.high:.3f}], written {trend.written}; "
              f"fleet age at the window's start {trend.start_h / DAY_H:.0f} days; rates "
              f"written at {trend.rated_h / DAY_H:.0f} days; the window's mean multiplier "
              f"{trend.mean_multiplier:.2f}")  # fmt: skip
    for c in result.classes:
        law = c.lifetime
        shape = "" if law is None else (
            f", shape {law.shape.value:.2f} [{law.shape.low:.2f}, {law.shape.high:.2f}] "
            f"-> {law.chosen}")  # fmt: skip
        refail = "" if c.refail is None else (
            f", repair does not hold {c.refail.prob.value:.3f} "
            f"[{c.refail.prob.low:.3f}, {c.refail.prob.high:.3f}], again after "
            f"{c.refail.hours.value:.1f} h, ~{c.recurrences:.0f} recurrences")  # fmt: skip
        repair = "" if c.repair_mean_hours is None else f", repair {c.repair_mean_hours:.2f} h"
        print(f"{c.name}: {c.events} failures, rate {c.rate.value:.3f} per 1k GPU-days, "
              f"written {c.written_rate:.4f}{shape}{refail}{repair}")  # fmt: skip
    if result.lemons is not None:
        raw = result.lemons.node_cv
        counts = "-" if raw is None else f"{raw.value:.3f}"
        fitted = result.node_cv_fit
        interval = "" if fitted is None else f" [{fitted.low:.3f}, {fitted.high:.3f}]"
        print(f"spread: dispersion p {result.lemons.p_value:.3g}, {result.lemons.spread}; "
              f"the counts' CV {counts}; node_rate_cv written {result.node_cv:.3f}{interval}")  # fmt: skip

    checked = check(result, log, args.replicas, args.seed)
    print(f"\ncheck ({checked.replicas} replicas of fleet.yaml): {checked.passed} of "
          f"{len(checked.judged)} judged measures within tolerance")  # fmt: skip
    for m in checked.measures:
        low, high = m.range
        if m.share:
            values = f"log {m.log:.1%}, model {m.mean:.1%} ({low:.1%}-{high:.1%})"
        else:
            values = f"log {m.log:,.0f}, model {m.mean:,.0f} ({low:,.0f}-{high:,.0f})"
        verdict = {None: "", True: " within", False: " OFF"}[m.holds()]
        print(f"  {m.label}: {values}{verdict}")

    if trend is not None and trend.written:
        print("\nwhat the trend says of a cluster brought up d days before a run "
              "(rates over those at the log's end; a power law below the window's "
              f"{trend.start_h / DAY_H:.0f} days of age extrapolates):")  # fmt: skip
        for days in (7, 30, 90, 365):
            age = FleetAge(days * 86400.0, trend.rated_h * 3600.0, trend.beta.value)
            first_month = age.operational(30 * 86400.0) / (30 * 86400.0)
            print(f"  {days:>4} days old: x{age.multiplier(0.0):.1f} on its first day, "
                  f"x{first_month:.1f} over its first 30 days")  # fmt: skip


if __name__ == "__main__":
    main()
