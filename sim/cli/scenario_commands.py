"""The commands about a scenario before anything is simulated: `init` (a scenario to start
from), `validate`, `calc` (the deterministic calculator, with a run's cost beside it) and
`fabric` (the collective on the fat tree, healthy or degraded).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sim.cli.common import (
    finite_or_none,
    json_option,
    load,
    params_text,
    scenario_argument,
    set_option,
    table_console,
    warn,
    warn_infeasible,
)
from sim.decide import compare
from sim.model import calculator, feasibility
from sim.model.scenario_set import ScenarioError, ScenarioSet
from sim.show import console as screen
from sim.show import report_scenario


@click.command()
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(path_type=Path))
@set_option
def validate(scenarios, overrides) -> None:
    """Check scenario files against the schema and the model; report every bad file, exit 2
    if any is bad."""
    bad = 0
    for path in scenarios:
        try:
            loaded = load(path, overrides)
            hopeless = feasibility.check(loaded)
        except ScenarioError as exc:
            bad += 1
            print(f"error: {exc}", file=sys.stderr)
            continue
        points = len(loaded.points)
        extra = f", {points} sweep points" if points > 1 else ""
        print(f"ok: {path} ({loaded.name}{extra})")
        warn_infeasible(loaded)
        warn(feasibility.memory_warnings(loaded), path)  # several files: each named
        warn(hopeless, path)
    if bad:
        if len(scenarios) > 1:
            print(f"{bad} of {len(scenarios)} scenario files are invalid", file=sys.stderr)
        click.get_current_context().exit(2)


@click.command()
@scenario_argument
@set_option
@click.option(
    "--run",
    "run_dir",
    type=click.Path(path_type=Path),
    help="A run of this scenario (`trainsim run`'s directory): the cost with failures "
    "its replicas measured, beside Daly's first-order estimate.",
)
@json_option
def calc(scenario, overrides, run_dir, as_json) -> None:
    """The deterministic calculator: step time, ideal time-to-train, checkpoint cost, Young/Daly, cost."""
    loaded = load(scenario, overrides)
    warn(feasibility.check(loaded))
    # a point that cannot run has no calculation: its reason instead
    results = [(p.params, p.infeasible or calculator.calculate(p.scenario)) for p in loaded.points]
    measured = run_costs(run_dir, loaded) if run_dir is not None else {}
    warn_memory(results)
    if as_json:
        doc = {
            "scenario": loaded.name,
            "points": [
                {"params": params, "infeasible": c}
                if isinstance(c, str)
                else {
                    "params": params,
                    **{k: finite_or_none(v) for k, v in dataclasses.asdict(c).items()},
                    **({"run_cost_usd": measured[i]} if i in measured else {}),
                }
                for i, (params, c) in enumerate(results)
            ],
        }
        print(json.dumps(doc))
        return
    console = table_console()
    for i, (params, c) in enumerate(results):
        if isinstance(c, str):
            console.print(f"{loaded.name}  {params}: [bold]infeasible[/bold]: {escape(c)}")
            continue
        title = f"{loaded.name}" + (f"  {params}" if params else "")
        table = Table(title=title, show_header=False, title_justify="left")
        screen.text_column(table, "quantity")
        table.add_column("value", justify="right")
        for label, value in report_scenario.calculation_rows(c):
            table.add_row(label, value)
        if i in measured:
            cost = measured[i]
            table.add_row(
                f"cost with failures (the run: {cost['replicas']:,} replicas)",
                f"mean ${cost['mean']:,.0f}, p95 ${cost['p95']:,.0f}",
            )
        screen.show(console, table)
        print_step_parts(console, c)
        if c.efficiency_warning:
            print(f"warning: {c.efficiency_warning}", file=sys.stderr)


def warn_memory(results: list[tuple[dict, calculator.Calculation | str]]) -> None:
    """calc: the points whose memory estimate is within its uncertainty of the GPU's memory
    (they run, and may or may not fit), on stderr as validate, run and plan say them."""
    for params, c in results:
        if not isinstance(c, str) and c.memory_warning:
            where = f"sweep point {params}: " if params else ""
            print(f"warning: {where}parallelism: {c.memory_warning}", file=sys.stderr)


def run_costs(run_dir: Path, loaded: ScenarioSet) -> dict[int, dict[str, float]]:
    """calc --run: per sweep point, the cost (`cost_usd`) the run's replicas measured, mean
    and p95 over the replicas without an error; the run must be of this scenario, point for
    point (its name and sweep points)."""
    run = compare.open_run(run_dir, "(--run)")
    table = run.ok
    if run.name != loaded.name or table["point"].max() >= len(loaded.points):
        raise click.BadParameter(
            f"{run_dir} is a run of {run.name!r} with {int(run.table['point'].max()) + 1} "
            f"sweep point(s), not of {loaded.name!r} with {len(loaded.points)}: give a run "
            "of this scenario",
            param_hint="--run",
        )
    if "cost_usd" not in table:
        raise click.BadParameter(
            f"{run_dir}: the replica table has no cost_usd column", param_hint="--run"
        )
    return {
        int(point): {
            "replicas": len(rows),
            "mean": float(rows["cost_usd"].mean()),
            "p95": float(rows["cost_usd"].quantile(0.95)),
        }
        for point, rows in table.groupby("point")
    }


def print_step_parts(console: Console, c: calculator.Calculation) -> None:
    """calc: where one step's time goes, and with measured points the fit's residuals."""
    if c.step_parts_s:
        step = sum(c.step_parts_s.values())
        parts = Table(title="where the step's time goes", title_justify="left")
        for column in ("part", "seconds", "share"):
            parts.add_column(column, justify="left" if column == "part" else "right")
        for name, seconds in c.step_parts_s.items():
            parts.add_row(name, f"{seconds:.4g}", f"{seconds / step:.1%}")
        console.print(parts)
    if c.fitted_points:
        fit = Table(
            title=f"fitted to the measured points: compute efficiency "
            f"{c.compute_efficiency:.4f}, overlap {c.fitted_overlap:.4f}",
            title_justify="left",
        )
        for column in ("measured at", "measured MFU", "fitted MFU", "residual"):
            fit.add_column(column, justify="left" if column == "measured at" else "right")
        for p in c.fitted_points:
            fit.add_row(
                p["where"],
                f"{p['measured_mfu']:.4f}",
                f"{p['fitted_mfu']:.4f}",
                f"{p['fitted_mfu'] - p['measured_mfu']:+.4f}",
            )
        console.print(fit)


@click.command(name="fabric")
@scenario_argument
@set_option
@click.option(
    "--degrade",
    "degrade",
    multiple=True,
    metavar="LINK=FACTOR",
    help="Scale a link's capacity by a factor in (0, 1], e.g. --degrade leaf0-spine0=0.5 "
    "(repeatable; fail a cable with --fail-switch).",
)
@click.option(
    "--fail-switch",
    "fail_switch",
    multiple=True,
    metavar="NAME",
    help="Take a spine or core switch, or an inter-switch cable or bundle, out of routing, "
    "e.g. --fail-switch spine3, --fail-switch leaf0-spine0.0 (repeatable).",
)
@json_option
def fabric_command(scenario, overrides, degrade, fail_switch, as_json) -> None:
    """Fat-tree sizing, gradient all-reduce (analytic and SimPy), step breakdown, MFU, bottlenecks."""
    loaded = load(scenario, overrides)
    factors = {}
    for item in degrade:
        name, _, value = item.partition("=")
        try:
            factors[name.strip()] = float(value)
        except ValueError:
            raise click.BadParameter(
                f"expected LINK=FACTOR, got {item!r}", param_hint="--degrade"
            ) from None
    # a sweep: the first point that can run (the loader refuses a sweep with none), named
    point = loaded.feasible[0]
    warn_infeasible(loaded)
    if point.params:
        print(
            f"note: the fabric of sweep point {point.index} ({params_text(point.params)}), "
            "the first that can run",
            file=sys.stderr,
        )
    try:
        report = calculator.fabric_report(point.scenario, factors, set(fail_switch))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--degrade/--fail-switch") from None

    def what_if_lines() -> list[str]:
        """What the what-if changed (the cables, each way), what those links carry in the
        all-reduce's first phase on the healthy fabric, and why its slowest flow, so the
        all-reduce and the step, moves or not (the flows are max-min fair shares)."""
        import numpy as np

        from sim.model import fabric as flows

        size = report.analytic.size_bytes
        before = flows.traffic(point.scenario, size)
        after = flows.traffic(point.scenario, size, degrade=factors, failed_switches=failed)
        cap0 = np.asarray(before.fabric.capacity_GB_s)
        cap1 = np.asarray(after.fabric.capacity_GB_s)
        names, directions = before.fabric.names, before.fabric.directions
        lines = []
        for name, factor in factors.items():
            cables = [
                i
                for i, (n, d) in enumerate(zip(names, directions, strict=True))
                if d == "up" and (n == name or n.startswith(f"{name}."))
            ]
            count = len(cables)
            kind = "a NIC cable" if ".rail" in name else f"{count} cable{'s' * (count > 1)}"
            lines.append(
                f"what-if: {name} ({kind}) at {factor:g} of its capacity: "
                f"{cap0[cables[0]]:.1f} → {cap1[cables[0]]:.1f} GB/s each way per cable"
            )
        ends: set[int] = set()  # the cables of a failed switch or bundle, both ways
        for name in sorted(failed):
            cut = {
                i
                for i, n in enumerate(names)
                if n.startswith((f"{name}.", f"{name}-")) or f"-{name}." in n
            }
            ends |= cut
            lines.append(f"what-if: {name} out of routing (the {len(cut) // 2} cables it ends)")
        touched = np.union1d(np.flatnonzero(cap0 != cap1), sorted(ends)).astype(int)
        phase0, phase1 = before.phases[0], after.phases[0]
        rates0 = flows.max_min_rates(phase0.paths, np.ones(len(phase0.paths), bool), cap0)
        rates1 = flows.max_min_rates(phase1.paths, np.ones(len(phase1.paths), bool), cap1)
        crossing = [k for k, path in enumerate(phase0.paths) if set(path) & set(touched)]
        shown = sorted({names[i] for i in touched}, key=lambda n: (len(n), n))
        listed = ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
        adaptive = point.scenario.network.routing == "adaptive"
        if adaptive and any(n.endswith(".uplinks") for n in shown):
            pipes = [i for i in touched if names[i].endswith(".uplinks") and directions[i] == "up"]
            pipe = pipes[0]
            route = (
                f"with adaptive routing a leaf's flows to other leaves spread over all its "
                f"uplinks as one pipe ({names[pipe]}: {cap0[pipe]:,.0f} → {cap1[pipe]:,.0f} "
                f"GB/s), so the traffic goes round what was lost"
            )
        elif all(".rail" in n for n in shown):
            route = "a NIC cable has no other way round, whatever the routing"
        elif failed:
            route = "with static routing their flows move onto the next port, shared with others"
        else:
            route = "with static routing each flow keeps its own port and gets what is left"
        lines.append(
            f"it carries: {len(crossing)} of the {len(phase0.paths):,} flows of the "
            f"all-reduce's {phase0.name} cross the links it changed ({listed}), "
            f"{sum(rates0[k] for k in crossing):,.0f} GB/s in all on the healthy fabric; {route}."
        )
        slow0, slow1 = float(rates0.min()), float(rates1.min())
        held = sim_.bottlenecks[0] if sim_.bottlenecks else None
        by = (
            f" ({held.name}: {held.capacity_GB_s:.1f} GB/s over {held.flows} flow"
            f"{'s' * (held.flows > 1)})"
            if held
            else ""
        )
        h = report.healthy_simulated.seconds * 1e3
        if abs(slow1 - slow0) <= 1e-9 * slow0:
            lines.append(
                f"so nothing moves: the {phase0.name} ends with its slowest flow, still "
                f"{slow1:.1f} GB/s, held by a link the what-if did not touch{by}; the "
                f"all-reduce stays {h:.1f} ms and the step {b.step_s:.3f} s. A NIC cable "
                f"(--degrade node0.rail0=0.5), or static routing (--set network.routing="
                "static), shows an effect."
            )
        else:
            lines.append(
                f"so the step moves: the {phase0.name} ends with its slowest flow, "
                f"{slow0:.1f} → {slow1:.1f} GB/s{by}; the all-reduce {h:.1f} → "
                f"{sim_.seconds * 1e3:.1f} ms, the step {b.step_s:.3f} → {report.step_s:.3f} s "
                "(the all-reduce's part that compute does not hide)."
            )
        return lines

    failed = set(fail_switch)
    if as_json:
        doc = {
            "scenario": loaded.name,
            "point": point.index,
            "params": point.params,
            "fat_tree": {
                **dataclasses.asdict(report.tree),
                "switches": report.tree.switches,
                "bisection_GB_s": report.tree.bisection_GB_s,
            },
            "gradient_allreduce": {
                "bytes_per_rank": report.analytic.size_bytes,
                "algorithm": report.analytic.algorithm,
                "analytic_s": report.analytic.seconds,
                "analytic_busbw_GB_s": report.analytic.busbw_GB_s,
                "simulated_s": report.simulated.seconds,
                "simulated_busbw_GB_s": report.simulated.busbw_GB_s,
                "healthy_simulated_s": report.healthy_simulated.seconds,
                "routing": point.scenario.network.routing,
            },
            "step": {
                **dataclasses.asdict(report.breakdown),
                "what_if_step_s": report.step_s,
                "what_if_mfu": report.mfu,
            },
            "bottlenecks": [dataclasses.asdict(b) for b in report.simulated.bottlenecks],
        }
        print(json.dumps(doc))
        return
    console = table_console()
    t, a, sim_, b = report.tree, report.analytic, report.simulated, report.breakdown
    where = f" (sweep point {point.index}: {params_text(point.params)})" if point.params else ""
    table = Table(title=f"{loaded.name}{where}: fabric", show_header=False, title_justify="left")
    screen.text_column(table, "quantity")
    screen.text_column(table, "value", justify="right")
    rows = [
        (
            "fat tree",
            f"{t.tiers} tiers, radix {t.radix}, oversubscription {t.oversubscription:g}:1",
        ),
        ("switches (leaf / spine / core)", f"{t.leaves} / {t.spines} / {t.cores} = {t.switches}"),
        ("cables", f"{t.cables:,}"),
        ("bisection bandwidth", f"{t.bisection_GB_s / 1e3:,.1f} TB/s"),
        ("routing (network.routing)", report.routing),
        (
            "gradient all-reduce per rank",
            f"{a.size_bytes / 1e9:.2f} GB over {a.ranks} ranks ({a.algorithm})",
        ),
        ("  analytic", f"{a.seconds * 1e3:.1f} ms, busbw {a.busbw_GB_s:.1f} GB/s"),
        (
            "  SimPy fabric",
            f"{report.healthy_simulated.seconds * 1e3:.1f} ms, busbw {report.healthy_simulated.busbw_GB_s:.1f} GB/s",
        ),
        *(
            [
                (
                    "  SimPy fabric, what-if",
                    f"{sim_.seconds * 1e3:.1f} ms, busbw {sim_.busbw_GB_s:.1f} GB/s",
                )
            ]
            if sim_ is not report.healthy_simulated
            else []
        ),
        ("step: compute", f"{b.compute_s:.3f} s"),
        ("step: tensor-parallel comm", f"{b.tensor_parallel_s:.3f} s"),
        ("step: pipeline bubble", f"{b.bubble_s:.3f} s"),
        (
            "step: pipeline sends, context-parallel",
            f"{b.pipeline_send_s + b.context_parallel_s:.3f} s",
        ),
        (
            "step: exposed DP comm",
            f"{b.exposed_data_parallel_s:.3f} s (of {b.data_parallel_s:.3f} s)",
        ),
        (
            "step time",
            f"{b.step_s:.3f} s"
            + (f" → {report.step_s:.3f} s with what-ifs" if report.step_s != b.step_s else ""),
        ),
        (
            "MFU",
            f"{b.mfu:.3f}"
            + (f" → {report.mfu:.3f} with what-ifs" if report.step_s != b.step_s else ""),
        ),
    ]
    for label, value in rows:
        table.add_row(label, value)
    screen.show(console, table)
    links = Table(title="most loaded links (lowest fair share first)", title_justify="left")
    for column in ["link", "direction", "capacity GB/s", "flows", "share GB/s", "utilisation"]:
        links.add_column(column, justify="left" if column in ("link", "direction") else "right")
    for link in sim_.bottlenecks:
        links.add_row(
            link.name,
            link.direction,
            f"{link.capacity_GB_s:.1f}",
            str(link.flows),
            f"{link.share_GB_s:.1f}",
            f"{link.utilisation:.0%}",
        )
    screen.show(console, links)
    if factors or fail_switch:
        for line in what_if_lines():
            console.print(line, highlight=False)


@click.command(name="init")
@click.argument("name")
@click.option(
    "--like",
    metavar="SCENARIO",
    help="Start from a shipped scenario's values (e.g. llama70b-1k) or a scenario file "
    "[the worked example of docs/scenarios.md: 7B on 128 H100s, NFS checkpoints].",
)
@click.option("--force", is_flag=True, help="Overwrite NAME.yaml if it exists.")
def init_command(name, like, force) -> None:
    """Write NAME.yaml in the current directory: a commented scenario with every required
    key and the common optional ones, each with its unit and source; it validates as written."""
    from sim.cli import scaffold

    path = scaffold.write(name, like, force)
    print(f"wrote {path}; check it with: trainsim validate {path}")
