"""The report's HTML pieces: escaped text, tables that stack into a card a row on a screen
too narrow for them (and the CSS that does it), shares, numbers at a column's decimals or in
SI units, a sweep point's parameters.
"""

from __future__ import annotations

import html
import math
from typing import Any

from sim.decide import answer
from sim.decide.compare import fmt_metric
from sim.model.columns import unit_of

# --------------------------------------------------------------------------- helpers


# A table's width as the page lays it out, in pixels: a character of its cells (.88rem) and
# a cell's padding and borders; a text column reads well at TEXT_CHARS or more a line (its
# longest word at least), a number never wraps.
CHAR_PX = 7.4
CELL_PAD_PX = 22
TEXT_CHARS = 16
# The page's text column at its widest (body max-width less its padding); the window below
# which the page's side padding narrows, and that padding (both sides) there and above.
PAGE_MAX_PX = 1086
NARROW_PX = 900
NARROW_PAD_PX, WIDE_PAD_PX = 32, 64
# The window widths a table can stack below (one CSS rule each); a table that fits a window
# of the first never stacks.
STACK_BELOW_PX = tuple(range(600, 1201, 50))


def html_table(
    headers: list[str],
    rows: list[list[str]],
    numeric: set[int],
    row_classes: list[str] | None = None,
    code: set[int] | None = None,
    key_columns: int = 0,
) -> str:
    """An HTML table of text cells (escaped here); `numeric` columns align right. In a
    window too narrow for it each row stacks into a card of "header: value" items, headed
    by its first cell (a metric, a class, a point), or by its first `key_columns` cells (a
    point's swept values), labelled and in bold."""
    code = code or set()

    def cell(tag: str, i: int, text: Any) -> str:
        names = ["num"] if i in numeric else []
        title = tag == "td" and i == 0 and not key_columns
        names += ["title"] if title else []
        names += ["key"] if tag == "td" and i < key_columns else []
        klass = f' class="{" ".join(names)}"' if names else ""
        if tag == "td" and not title:  # its header, before it when the row is a card
            klass += f' data-label="{escaped(headers[i])}"'
        inner = escaped(text).replace("\n", "<br>")  # a cell's second line (a share)
        if i in code and tag == "td":
            inner = f"<code>{inner}</code>"
        return f"<{tag}{klass}>{inner}</{tag}>"

    head = "<tr>" + "".join(cell("th", i, h) for i, h in enumerate(headers)) + "</tr>"
    body = []
    for n, row in enumerate(rows):
        klass = row_classes[n] if row_classes else ""
        attr = f' class="{escaped(klass)}"' if klass else ""
        body.append(f"<tr{attr}>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>")
    stack = stack_class(table_px(headers, rows, numeric))
    klass = f' class="{stack}"' if stack else ""
    return (
        f'<div class="scroll"><table{klass}><thead>{head}</thead><tbody>{"".join(body)}</tbody>'
        "</table></div>"
    )


def table_px(headers: list[str], rows: list[list[str]], numeric: set[int]) -> float:
    """The width a table reads well at: its numbers on one line, its text columns at
    TEXT_CHARS a line or their longest word (headers wrap at their spaces)."""
    width = 0.0
    for i, header in enumerate(headers):
        lines = [line for row in rows for line in str(row[i]).split("\n")]
        longest_line = max(map(len, lines), default=0)
        longest_word = max((len(w) for text in [header, *lines] for w in text.split()), default=0)
        if i in numeric:
            chars = max(longest_line, longest_word)
        else:
            chars = max(min(longest_line, TEXT_CHARS), longest_word)
        width += chars * CHAR_PX + CELL_PAD_PX
    return width


def stack_class(width_px: float) -> str:
    """The class that stacks a table `width_px` wide in the windows too narrow for it:
    'stack-900' below 900 px, 'stack' in every window (wider than the page at its widest),
    '' for a table that fits a 600-pixel window."""
    if width_px > PAGE_MAX_PX:
        return "stack"
    window = width_px + NARROW_PAD_PX
    if window > NARROW_PX:
        window = width_px + WIDE_PAD_PX
    if window <= STACK_BELOW_PX[0]:
        return ""
    return f"stack-{next(b for b in STACK_BELOW_PX if window <= b)}"


# A stacked table: a card a row, its cells flowing as "header: value" items (the header row
# kept for screen readers, out of sight), nothing wider than the card.
_STACKED = """
TABLE, TABLE tbody { display: block; }
TABLE thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
TABLE tr { display: flex; flex-wrap: wrap; align-items: baseline; gap: .1rem 1.3rem;
  padding: .4rem .7rem; border: 1px solid var(--line); }
TABLE tr + tr { border-top: 0; }
TABLE td { display: block; border: 0; padding: 0; text-align: left; white-space: normal; }
TABLE td[data-label]::before { content: attr(data-label) ": "; color: var(--muted); }
TABLE td.title { flex-basis: 100%; font-weight: 600; }
TABLE td.key { font-weight: 600; }
"""


def narrow_window_css() -> str:
    """The CSS of a narrow window: the page's side padding (NARROW_PAD_PX below NARROW_PX),
    and the stack classes (`stack` in every window, `stack-N` in one below N px)."""
    rules = [
        f"@media (max-width: {NARROW_PX - 0.02:g}px) {{ body {{ padding: 1rem 1rem 3rem; }} }}",
        _STACKED.replace("TABLE", "table.stack"),
    ]
    for below in STACK_BELOW_PX[1:]:
        rules.append(
            f"@media (max-width: {below - 0.02:g}px) {{"
            + _STACKED.replace("TABLE", f"table.stack-{below}")
            + "}"
        )
    return "\n".join(rules)


def share_text(
    metric: str, value: float, total: float, between: str = " ", decimals: int | None = None
) -> str:
    """A part's value and its share of the total ('$1,234 (5.0%)'; `between` the two;
    `decimals`: those of its column, for numbers that are not dollars)."""
    text = number_in(metric, float(value), decimals)
    if total and math.isfinite(total) and math.isfinite(value):
        text += f"{between}({value / total:.1%})"
    return text


def number_in(metric: str, value: float, decimals: int | None) -> str:
    """A value as its column writes it: with the column's decimals (answer.same_decimals),
    or as fmt_metric does (dollars, or one value alone)."""
    if decimals is None or unit_of(metric) == "USD":
        return fmt_metric(metric, value)
    return answer.with_decimals(value, decimals)


def column_decimals(values: Any) -> int:
    """The decimals a column of a table by point writes its numbers with (3 significant
    digits at its largest value)."""
    return answer.decimals_for([float(v) for v in values], significant=3)


def params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={value_text(v)}" for k, v in params.items())


def value_text(value: Any) -> str:
    """A number as a user writes it: 4 not 4.0, 0.5 not 0.50000001."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}" if abs(value) >= 1e4 else str(int(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def si_text(value: float) -> str:
    """7.0e9 → 7B, 1.4e12 → 1.4T."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.4g}{suffix}"
    return f"{value:g}"


def escaped(text: Any) -> str:
    return html.escape(str(text), quote=True)
