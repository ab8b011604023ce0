"""Executes the notebooks in a real kernel and checks that they show their figures.

Running without error is not enough: a figure built as a bare `Figure` and never
displayed shows as `<Figure size ...>` text, so each notebook must produce exactly
the images it is meant to show, one per cell that builds a figure.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"

# images each notebook is meant to show; a figure cell that shows nothing, or shows one twice,
# changes the count
FIGURES = {
    "checkpoint_intervals.ipynb": 3,
    "fabric.ipynb": 3,
    "from_your_data.ipynb": 3,
    "operations.ipynb": 4,
    "sizing.ipynb": 1,
    "storage.ipynb": 1,
}

# a cell that creates a figure, whichever way it does so
BUILDS_FIGURE = re.compile(r"\b(plt\.subplots|plt\.figure|Figure|plots\.\w+)\(")

TIMEOUT_S = 300


def _execute(name: str, cwd: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(
        nb, timeout=TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    ).execute()
    return nb


def _images(cell: nbformat.NotebookNode) -> int:
    return sum(
        1
        for output in cell.get("outputs", [])
        if output.output_type in ("display_data", "execute_result")
        and "image/png" in output.get("data", {})
    )


def _check_figures(name: str, nb: nbformat.NotebookNode) -> None:
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    figure_cells = [cell for cell in code if BUILDS_FIGURE.search(cell.source)]
    assert figure_cells, f"{name}: no cell builds a figure"
    for cell in figure_cells:
        assert _images(cell) >= 1, (
            f"{name}: a figure cell displayed no image:\n{cell.source}\n"
            f"outputs: {[o.get('data', {}).get('text/plain', o.output_type) for o in cell.outputs]}"
        )
    shown = sum(_images(cell) for cell in code)
    assert shown == FIGURES[name], f"{name}: {shown} images shown, {FIGURES[name]} expected"


def test_every_notebook_is_checked():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(FIGURES)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_notebook_shows_its_figures(name):
    _check_figures(name, _execute(name, NOTEBOOKS))


def test_notebook_runs_from_repository_root():
    # JupyterLab starts the kernel in the notebook's folder, but papermill, or VS Code with
    # its notebook root set to the workspace, start it at the repository root: the notebooks
    # must find scenarios/ either way. One notebook, the quickest, is enough to prove it.
    name = "fabric.ipynb"
    _check_figures(name, _execute(name, ROOT))


# a colour written out in a notebook (not sim.show.palette's) ...
LITERAL_COLOUR = re.compile(r"""["'](tab:\w+|#[0-9a-fA-F]{6}|C\d)["']""")
# ... next to a time bucket or a part of downtime: that series must take the palette's colour
BUCKET_WORDS = re.compile(
    r"slowdown|lost.work|stall|downtime|node.wait|detect|restart|checkpoint.load|ideal"
)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_notebooks_colour_buckets_from_the_palette(name):
    """A series that is a time bucket or a part of downtime is drawn in sim.show.palette's colour
    for it (slowdown orange, downtime brown, ...), as in every figure of a run; a colour
    written out beside one (the old 'tab:orange' slowdown, 'tab:red' stall) fails."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines = cell.source.splitlines()
        for index, line in enumerate(lines):
            if not LITERAL_COLOUR.search(line):
                continue
            around = " ".join(lines[max(0, index - 1) : index + 2])
            assert not BUCKET_WORDS.search(around), (
                f"{name}: a bucket drawn in a colour of its own, not sim.show.palette's:\n{line}"
            )
