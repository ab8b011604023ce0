"""The report's HTML pieces: escaped text, tables with a header and an optional caption,
shares, numbers at a column's decimals or in SI units, a sweep point's parameters.
"""

from __future__ import annotations

import html
import math
from typing import Any

from sim.decide import answer
from sim.decide.compare import fmt_metric
from sim.model.columns import unit_of

# --------------------------------------------------------------------------- helpers


def html_table(
    headers: list[str],
    rows: list[list[str]],
    numeric: set[int],
    row_classes: list[str] | None = None,
    code: set[int] | None = None,
) -> str:
    """An HTML table of text cells (escaped here); `numeric` columns align right."""
    code = code or set()

    def cell(tag: str, i: int, text: Any) -> str:
        klass = ' class="num"' if i in numeric else ""
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
    return (
        f'<div class="scroll"><table><thead>{head}</thead><tbody>{"".join(body)}</tbody>'
        "</table></div>"
    )


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
