"""Where every command's tables and answers go, so that they read the same in a terminal,
a pipe and a log: stdout as wide as the terminal, or `COLUMNS` (else 120) when piped or
logged; a key or number column is never cut short: text columns wrap, a table that does not
fit drops its lines, and one that still does not fit is printed as plain lines, one per row.
Sentences (an answer, a note) wrap at that width at spaces, never inside a word, so a path is
never broken mid-name (one longer than the line stays whole on a line of its own). Progress goes to stderr (`sim.runs.progress`, whose width rule this shares).
"""

from __future__ import annotations

import sys
import textwrap
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sim.runs.progress import stream_width

# A text column keeps at least this many characters (or its longest cell, if shorter):
# narrower, a status reads one word a line
TEXT_MIN = 16


def stdout_console() -> Console:
    """The console tables and answers are printed on: colours only in a terminal."""
    return Console(width=stream_width(sys.stdout))


# Lines a sentence wraps onto are indented this much deeper than its first line, deeper than
# the two spaces the lines of an answer step by, so a reader can join them again.
CONTINUATION = 4


def wrapped(text: str, width: int) -> list[str]:
    """`text` (one line, perhaps indented) wrapped at spaces to `width`: its further lines
    indented CONTINUATION deeper, never broken inside a word (a path stays whole)."""
    indent = text[: len(text) - len(text.lstrip(" "))]
    return textwrap.wrap(
        text,
        width=max(width, len(indent) + CONTINUATION + 1),
        subsequent_indent=indent + " " * CONTINUATION,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [""]


def say(console: Console, text: str, style: str | None = None) -> None:
    """Print a sentence (plain text, no markup; in `style` on a terminal) wrapped to the
    console's width (wrapped)."""
    for line in wrapped(text, console.width):
        console.print(Text(line, style=style or ""), highlight=False, soft_wrap=True)


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
