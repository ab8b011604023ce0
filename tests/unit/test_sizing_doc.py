"""docs/sizing.md is in sync with the scenarios: its calculator tables are what
benchmarks/sizing_table.py computes now, and it was generated with the script's defaults.

The Monte Carlo columns are not rerun here (minutes); the same script writes them, from
the same rows, with the replicas the page states.
"""

from __future__ import annotations

import difflib

from benchmarks import sizing_table
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "sizing.md"
REGENERATE = ".venv/bin/python benchmarks/sizing_table.py"


def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def table_rows(text: str, first_header_cell: str) -> list[list[str]]:
    """The body rows of the markdown table whose header starts with `first_header_cell`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header_cell} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_calculator_tables_match_what_the_script_computes():
    text = page()
    stale = []
    for table in sizing_table.deterministic_tables():
        if table not in text:
            header = table.splitlines()[0]
            lines = text.splitlines()
            start = next((i for i, line in enumerate(lines) if line == header), None)
            old = lines[start : start + len(table.splitlines())] if start is not None else []
            stale.append(
                "\n".join(
                    difflib.unified_diff(
                        old, table.splitlines(), "docs/sizing.md", "now", lineterm=""
                    )
                )
                or f"table missing: {header}"
            )
    assert not stale, f"docs/sizing.md is stale; regenerate with `{REGENERATE}`:\n" + "\n".join(
        stale
    )


def test_the_page_was_generated_with_the_default_command_and_replicas():
    text = page()
    assert f"Regenerate with `{REGENERATE}` (seed {sizing_table.DEFAULT_SEED};" in text
    # the calculator's table also starts with "row": take the one under the Monte Carlo heading
    mc = table_rows(text[text.index("## With failures") :], "row")
    assert [cells[0] for cells in mc] == [row.label for row in sizing_table.ROWS]
    assert [int(cells[3].replace(",", "")) for cells in mc] == [
        row.replicas for row in sizing_table.ROWS
    ]
    for cells in mc:
        assert "—" not in cells, f"a Monte Carlo row was left empty: {cells}"


def test_every_row_names_a_shipped_scenario_inside_the_guide_size():
    for row in sizing_table.ROWS:
        assert row.path.is_file(), row.scenario
        assert row.size in sizing_table.GUIDE_GPUS
    sizes = {row.size for row in sizing_table.ROWS}
    assert sizes == set(sizing_table.GUIDE_GPUS), "every size of the guide has a row"


def test_the_guide_switch_count_is_what_the_sizing_rule_gives_for_40_port_switches():
    variants = sizing_table.tree_variants()
    assert variants[0].tree.switches == 48  # NVIDIA SuperPOD, 1,024 GPUs: 32 leaf + 16 spine
    matches = [v for v in variants if v.tree.switches == sizing_table.GUIDE_70B_SWITCHES]
    assert [(v.gpus, v.radix, v.rails, v.tree.tiers) for v in matches] == [(1000, 40, 1, 3)]
