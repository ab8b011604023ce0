"""Where every command writes, so that it reads the same in a terminal, a pipe and a log.

Tables go to stdout as wide as the terminal, or `COLUMNS` (else 120) when piped or logged;
a key or number column is never cut short: text columns wrap, a table that does not fit
drops its lines, and one that still does not fit is printed as plain lines, one per row.
Progress goes to stderr: a live bar in a terminal, an occasional plain line anywhere else.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

# The width of a pipe or a log without COLUMNS: wide enough for the sweep tables.
PIPE_WIDTH = 120

# A text column keeps at least this many characters (or its longest cell, if shorter):
# narrower, a status reads one word a line
TEXT_MIN = 16

# A plain progress line when the work passes a tenth of its total (10%, 20%, ...), at most
# one every PLAIN_SECONDS: a few lines a task in a log, however small its chunks.
PLAIN_STEP = 0.1
PLAIN_SECONDS = 10.0


def _width(stream: Any) -> int | None:
    """The terminal's width (None: rich asks it), else COLUMNS, else PIPE_WIDTH."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if stream.isatty() else PIPE_WIDTH


def stdout_console() -> Console:
    """The console tables and answers are printed on: colours only in a terminal."""
    return Console(width=_width(sys.stdout))


def stderr_console() -> Console:
    return Console(stderr=True, width=_width(sys.stderr))


# --------------------------------------------------------------------------- tables


def text_column(table: Table, header: str, **options: Any) -> None:
    """A column of words (a status, a reason, a verdict): it wraps, at spaces, to fit, at
    no fewer than TEXT_MIN characters a line."""
    table.add_column(header, overflow="fold", **options)
    # read by required_width (rich's own min_width would widen a column of short words)
    table.columns[-1].words_min_width = TEXT_MIN  # type: ignore[attr-defined]


def _lines_width(text: Any) -> int:
    plain = text.plain if isinstance(text, Text) else str(text)
    return max((cell_len(line) for line in plain.splitlines()), default=0)


def _word_width(text: Any) -> int:
    plain = text.plain if isinstance(text, Text) else str(text)
    return max((cell_len(word) for word in plain.split()), default=0)


def required_width(table: Table) -> int:
    """The narrowest width at which no column of `table` is cut short: every column that
    does not wrap whole, each one that wraps as wide as its longest word (a text_column:
    at least TEXT_MIN), plus padding and borders."""
    total = table._extra_width  # the box's edges and separators
    for index, column in enumerate(table.columns):
        cells = [column.header, *column.cells]
        if column.overflow == "fold":  # it wraps at its spaces
            longest = max(_lines_width(c) for c in cells)
            least = getattr(column, "words_min_width", 0)
            width = max(max(_word_width(c) for c in cells), min(longest, least))
        else:
            width = max(_lines_width(c) for c in cells)
        total += width + table._get_padding_width(index)
    return total


def show(console: Console, table: Table) -> None:
    """Print `table` so that no key or number column is elided: as a table if it fits the
    console's width (text columns wrap), else without its lines (two spaces between
    columns), else as plain lines, one per row, each cell named by its column's header.
    Columns that are not text columns are set not to wrap; the table's layout is changed."""
    for column in table.columns:
        if column.overflow != "fold":
            column.no_wrap = True
    if required_width(table) <= console.width:
        console.print(table)
        return
    # without its lines and with two spaces between columns, it may fit still
    table.box, table.show_edge, table.pad_edge = None, False, False
    table.padding = (0, 2, 0, 0)
    if required_width(table) <= console.width:
        console.print(table)
        return
    if table.title:
        console.print(table.title, highlight=False)
    headers = [_plain(column.header).replace("\n", " ") for column in table.columns]
    cells = [list(column.cells) for column in table.columns]
    for row in range(table.row_count):
        values = [_plain(cells[c][row]).replace("\n", " ") for c in range(len(headers))]
        if table.show_header:
            named = [f"{h}: {v}" if h else v for h, v in zip(headers, values) if v.strip()]
            line = "- " + "; ".join(named)
        else:  # a table of quantities and values
            line = "- " + ": ".join(v for v in values if v.strip())
        # a row's further lines indented under its first, never broken inside a word
        wrapped = textwrap.fill(
            line, width=console.width, subsequent_indent="  ", break_long_words=False
        )
        console.print(Text(wrapped), highlight=False, soft_wrap=True)
    if table.caption:
        console.print(table.caption, highlight=False)


def _plain(cell: Any) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return Text.from_markup(str(cell)).plain


# --------------------------------------------------------------------------- progress


class PlainProgress:
    """rich's Progress as far as trainsim uses it (add_task, advance, update, start,
    stop), as plain lines for a pipe or a log: one when a task passes each tenth of its
    total, one when it is done (with the time it took)."""

    def __init__(self, console: Console, unit: str):
        self.console, self.unit = console, unit
        self._tasks: dict[int, dict[str, Any]] = {}

    def start(self) -> None:
        pass

    def stop(self) -> None:
        for task in self._tasks.values():
            if not task["said_done"] and task["completed"] >= task["total"] > 0:
                self._say(task)

    def add_task(self, description: str, total: int) -> int:
        task_id = len(self._tasks)
        self._tasks[task_id] = {
            "description": description,
            "total": total,
            "completed": 0,
            "step": 0,  # the last tenth said
            "started": time.monotonic(),
            "said_at": time.monotonic(),
            "said_done": False,
        }
        return task_id

    def advance(self, task_id: int, count: int) -> None:
        task = self._tasks[task_id]
        task["completed"] += count
        total = task["total"]
        if total <= 0:
            return
        step = int(min(task["completed"], total) / total / PLAIN_STEP + 1e-9)
        if task["completed"] >= total:
            self._say(task)
        elif step > task["step"] and time.monotonic() - task["said_at"] >= PLAIN_SECONDS:
            task["step"] = step
            self._say(task)

    def update(self, task_id: int, description: str) -> None:
        """A new description; said at once when the task is done (a round's outcome)."""
        task = self._tasks[task_id]
        task["description"] = description
        if task["said_done"]:
            self.console.print(description, highlight=False, markup=False, soft_wrap=True)

    def _say(self, task: dict[str, Any]) -> None:
        if task["said_done"]:
            return
        done, total = min(task["completed"], task["total"]), task["total"]
        task["said_at"] = time.monotonic()
        if done >= total:
            task["said_done"] = True
            took = time.monotonic() - task["started"]
            tail = f"done in {_elapsed(took)}"
        else:
            tail = f"{done / total:.0%}"
        line = f"{task['description']}: {done:,}/{total:,} {self.unit}, {tail}"
        self.console.print(line, highlight=False, markup=False, soft_wrap=True)


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, whole_seconds = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{whole_seconds:02d}"


def progress(*columns: Any, unit: str) -> Progress | PlainProgress:
    """A live bar of `columns` on stderr in a terminal (or a notebook's widget); plain
    lines anywhere else."""
    console = stderr_console()
    if console.is_jupyter or (console.is_terminal and not console.is_dumb_terminal):
        return Progress(
            *(columns or (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())),
            console=console,
        )
    return PlainProgress(console, unit)
