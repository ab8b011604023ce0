"""What the make_*.py generators share: the root-finding cell and the writer.

Not a notebook helper at run time: the notebooks stay self-contained, this only
keeps the code the generators write into them identical.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat as nbf

# The kernel's cwd is the notebook's folder in JupyterLab but the repository root under
# papermill or VS Code set to the workspace: walk up to the folder that has both markers.
FIND_ROOT = (
    "def find_root(start: Path) -> Path:\n"
    '    """The checkout at or above start: the kernel may start in notebooks/ or at the root."""\n'
    "    for folder in (start, *start.parents):\n"
    "        if (folder / 'scenarios').is_dir() and (folder / 'pyproject.toml').is_file():\n"
    "            return folder\n"
    "    raise FileNotFoundError(f'no scenarios/ and pyproject.toml at or above {start}')\n\n\n"
    "ROOT = find_root(Path.cwd())"
)


def write(cells: list[nbf.NotebookNode], name: str) -> Path:
    """Write the notebook beside the generators without outputs, then ruff-format it."""
    # fixed ids: random ones would change every cell of the diff on each regeneration
    for index, cell in enumerate(cells):
        cell.id = f"cell-{index:02d}"
    nb = nbf.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = Path(__file__).with_name(name)
    path.write_text(nbf.writes(nb))
    subprocess.run([sys.executable, "-m", "ruff", "format", "--quiet", str(path)], check=True)
    return path
