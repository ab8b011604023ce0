"""The commands that read finished run directories: `compare` (two runs side by side, with
the figure of their time-to-train distributions) and `report` (one HTML page of a run).
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from sim.cli import arguments
from sim.cli.common import json_option, plain_json, table_console
from sim.decide import compare
from sim.runs.files import protect_run_files
from sim.show import compare_figure
from sim.show import console as screen
from sim.show import report as run_report


@click.command(name="compare")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option(
    "--point-a",
    type=arguments.POINT,
    metavar="I",
    help="Compare only sweep point I of RUN_A (the `point` of its summary).",
)
@click.option("--point-b", type=arguments.POINT, metavar="J", help="The same for RUN_B.")
@click.option(
    "--figure",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Where to write the time-to-train figure [RUN_B/compare-with-<RUN_A id>.png].",
)
@click.option("--no-figure", is_flag=True, help="Write no figure.")
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Show every metric [the headline ones and those whose 95% CI excludes zero].",
)
@json_option
def compare_command(run_a, run_b, point_a, point_b, figure, no_figure, every, as_json) -> None:
    """Two runs side by side: the headline metrics and every one that clearly differs (--all:
    every metric), the means in A and B, B − A with a 95% CI, which is better. Paired by
    replica when both share seed and replica ids, else Welch's t.

    Sweep points are matched by their swept values (one run with one point: against each
    point of the other); --point-a/--point-b pick one point of each.
    """
    if no_figure and figure is not None:
        raise click.UsageError("give --figure PATH or --no-figure, not both")
    if figure is not None:
        arguments.check_figure_path(figure)
        # never over a run's own table, manifest or parts, nor into a third run's directory
        protect_run_files(
            (run_a, run_b), figure, "--figure",
            f"or leave --figure out for {run_b / compare.default_figure_name(run_a)}",
        )  # fmt: skip
    result = compare.compare_runs(run_a, run_b, point_a, point_b)
    written = None if no_figure else compare_figure.write_figure(result, figure)
    if as_json:
        print(json.dumps(compare.to_json(result, written), default=plain_json))
        return
    console = table_console()
    if result.a.name != result.b.name:  # the first line says so
        screen.say(console, arguments.different_scenarios(result.a.name, result.b.name))
    for item in compare.tables(result, every):
        if isinstance(item, Table):
            screen.show(console, item)
        else:  # a sentence, wrapped at spaces: a run's path is never broken mid-name
            screen.say(console, item)
    if written is not None:
        screen.say(console, f"figure: {written}")


@click.command(name="report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Where to write the HTML [RUN_DIR/report.html].",
)
def report_command(run_dir, out) -> None:
    """One self-contained HTML page of a run: the scenario in words, the calculator, the
    summaries, every figure, cost, downtime and failures, plan results, provenance."""
    # never over a run's own table, manifest, parts or figures, nor through a link
    protect_run_files(
        run_dir,
        run_dir / "report.html" if out is None else out,
        "--out",
        "" if out is None else f"or leave --out out for {run_dir / 'report.html'}",
    )
    print(f"report: {run_report.write_report(run_dir, out)}")
