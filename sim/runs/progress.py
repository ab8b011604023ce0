"""The progress of replicas being run, on stderr: a live bar in a terminal (or a notebook's
widget), an occasional plain line in a pipe or a log; the time left while it runs, the time
it took once done. Also the width rule every command's output follows (the terminal's, else
`COLUMNS`, else 120), which the console's tables share (`sim.show.console`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

# The width of a pipe or a log without COLUMNS: wide enough for the sweep tables.
PIPE_WIDTH = 120

# A plain progress line when the work passes a tenth of its total (10%, 20%, ...), at most
# one every PLAIN_SECONDS: a few lines a task in a log, however small its chunks.
PLAIN_STEP = 0.1
PLAIN_SECONDS = 10.0


def stream_width(stream: Any) -> int | None:
    """The terminal's width (None: rich asks it), else COLUMNS, else PIPE_WIDTH."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if stream.isatty() else PIPE_WIDTH


def stderr_console() -> Console:
    return Console(stderr=True, width=stream_width(sys.stderr))


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


def progress_display(*columns: Any, unit: str) -> Progress | PlainProgress:
    """A live bar of `columns` on stderr in a terminal (or a notebook's widget); plain
    lines anywhere else."""
    console = stderr_console()
    if console.is_jupyter or (console.is_terminal and not console.is_dumb_terminal):
        return Progress(
            *(columns or (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())),
            console=console,
        )
    return PlainProgress(console, unit)


class TimeColumn(TimeRemainingColumn):
    """A progress bar's time: what is left while it runs, what it took once done (rich's
    TimeRemainingColumn ends on 0:00:00)."""

    def render(self, task):  # type: ignore[no-untyped-def]
        if task.finished:
            took = task.finished_time if task.finished_time is not None else task.elapsed
            minutes, seconds = divmod(int(round(took or 0)), 60)
            hours, minutes = divmod(minutes, 60)
            text = f"{took or 0:.1f} s" if (took or 0) < 60 else f"{hours}:{minutes:02d}:{seconds:02d}"  # fmt: skip
            return Text(f"done in {text}", style="progress.elapsed")
        return Text(f"{super().render(task).plain} left", style="progress.remaining")


class ReplicaBar:
    """The replicas' progress bar on stderr (silent when disabled): the time left while it runs,
    the time it took once every replica is done."""

    def __init__(self, enabled: bool, total: int, name: str):
        self.enabled, self.total, self.name = enabled, total, name
        self._progress: Progress | PlainProgress | None = None

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda n: None
        self._progress = progress_display(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("replicas"),
            TimeColumn(),
            unit="replicas",
        )
        self._progress.start()
        task = self._progress.add_task(self.name, total=self.total)
        return lambda n: self._progress.advance(task, n)  # type: ignore[union-attr]

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
