"""The `trainsim` executable's entry point (the console script and `python -m sim`).

A Ctrl-C at any moment exits 130 with one line and no traceback: while the command's modules
load (numpy, pandas, matplotlib: about half a second) the process ends at once (nothing is
written yet), from then on the command stops as it says, and once its answer is out a
Ctrl-C changes nothing. Only the executable imports this module: importing it takes
SIGINT. stdout and stderr are taken by `sim.cli.stdio`.
"""

from __future__ import annotations

import os
import signal
import sys


def _abort_loading(signum: int, frame: object) -> None:
    try:
        os.write(2, b"aborted\n")
    finally:
        os._exit(130)


# first of all: the console script imports this module before `main` can catch anything
signal.signal(signal.SIGINT, _abort_loading)


def _aborted() -> None:
    """A Ctrl-C the command did not handle: one line, exit 130, and no second signal's
    traceback on the way out."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    try:
        print("aborted", file=sys.stderr)
    finally:
        sys.exit(130)


def main() -> None:
    from sim.cli import stdio

    stdio.take_streams()
    from sim.cli.commands import main as command

    code: int | str | None = 0
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the command's from here
        try:
            command()
        except SystemExit as end:
            code = end.code
        except stdio.StreamFailed as failure:  # raised outside the command's own handling
            code = stdio.stream_failed(failure)
        code = stdio.flush(code)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the answer is out
    except KeyboardInterrupt:
        _aborted()
    sys.exit(code)
