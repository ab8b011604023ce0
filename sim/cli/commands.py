"""The `trainsim` command: the group its sub-commands are registered on, and `main`,
which maps what went wrong to an exit code.

Exit codes: 0 success, 2 bad input (scenario or arguments), 1 internal error (also replicas
that raised), 130 stopped.
Tables go to stdout; progress and warnings to stderr; `--json` prints only JSON. The
sub-commands live by what they answer: `run_commands` (run, merge, export),
`optimize_command`, `plan_command`, `scenario_commands` (init, validate, calc, fabric),
`rundir_commands` (compare, report) and `data_commands` (fit, forecast).
"""

from __future__ import annotations

import sys
import traceback

import click

from sim.cli import optimize_command, plan_command, run_commands, rundir_commands, scenario_commands
from sim.cli.common import exit_stopped
from sim.cli.data_commands import fit as fit_command
from sim.cli.data_commands import forecast as forecast_command
from sim.cli.stdio import StreamFailed, stream_failed
from sim.model.scenario_set import ScenarioError
from sim.runs import debugging
from sim.runs.api import ReplicasRaised


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trainsim")
def app() -> None:
    """trainsim: how long will this training run really take, and what will it cost?"""


for command in (
    run_commands.run,
    run_commands.merge,
    run_commands.export_command,
    optimize_command.optimize,
    plan_command.plan_command,
    scenario_commands.init_command,
    scenario_commands.validate,
    scenario_commands.calc,
    scenario_commands.fabric_command,
    rundir_commands.compare_command,
    rundir_commands.report_command,
    fit_command,  # the commands that start from the user's own data
    forecast_command,
):
    app.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: maps bad input to exit 2 and internal errors to exit 1, never a traceback.
    `argv` (default: the command line) lets tests run a command in-process."""
    try:
        code = app.main(args=argv, standalone_mode=False, prog_name="trainsim")
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except click.ClickException as exc:
        exc.show(file=sys.stderr)
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        print("aborted", file=sys.stderr)
        exit_stopped()
    except StreamFailed as failure:  # the executable's stdout or stderr (sim/cli/stdio.py)
        sys.exit(stream_failed(failure))
    except ReplicasRaised as exc:  # the run is kept; its answer is not to be trusted
        hint = ""
        if not debugging():
            hint = " (its traceback: run again with TRAINSIM_DEBUG=1)"
        elif exc.traceback:
            print(exc.traceback, end="", file=sys.stderr)
        else:
            hint = " (it raised before this resume: its traceback is not at hand)"
        print(f"error: {exc}{hint}", file=sys.stderr)
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001
        if debugging():
            traceback.print_exc()
        print(
            f"internal error: {type(exc).__name__}: {exc} "
            "(a bug in trainsim; set TRAINSIM_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
