"""The `trainsim` executable's entry point: a Ctrl-C while the command's modules are still
loading (numpy, pandas, matplotlib: about half a second) exits 130 like one a moment later,
with no traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from sim.cli.commands import main as command
    except KeyboardInterrupt:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    command()
