"""The groups of `sim/` import one way, down the order below (docs/architecture.md,
"Layering"): a module may import its own group and the groups before it, never one after.
Every import counts, also one inside a function or under `if TYPE_CHECKING:`."""

from __future__ import annotations

import ast
from pathlib import Path

SIM = Path(__file__).resolve().parents[2] / "sim"

# lowest first: what a scenario is, one replica, many replicas, a user's own log, answers,
# what people look at, the command
GROUPS = ["model", "engine", "runs", "data", "decide", "show", "cli"]


def group_of(module: str) -> str | None:
    """The group of a dotted module name under `sim` (None: the package itself)."""
    parts = module.split(".")
    if parts[0] != "sim" or len(parts) < 2 or parts[1] not in GROUPS:
        return None
    return parts[1]


def imported_modules(node: ast.AST) -> list[str]:
    """The `sim` modules an import statement names (`from sim import runs` names sim.runs)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        if node.module == "sim":
            return [f"sim.{alias.name}" for alias in node.names]
        return [node.module]
    return []


def upward_imports(sim: Path = SIM) -> list[str]:
    """One line per import of a group above the importing module's own."""
    found = []
    for path in sorted(sim.rglob("*.py")):
        module = ".".join(path.relative_to(sim.parent).with_suffix("").parts)
        group = group_of(module)
        if group is None:
            continue  # sim/__init__.py and sim/__main__.py (the command, above every group)
        rank = GROUPS.index(group)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for target in imported_modules(node):
                other = group_of(target)
                if other is not None and GROUPS.index(other) > rank:
                    found.append(
                        f"{path.relative_to(sim.parent)}:{node.lineno} ({group}) imports "
                        f"{target} ({other}), a group above it"
                    )
    return found


def test_every_module_is_in_a_group():
    loose = [p.name for p in SIM.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert not loose, f"modules outside the groups {GROUPS}: {loose}"
    folders = sorted(p.name for p in SIM.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(GROUPS)


def test_groups_import_one_way():
    problems = upward_imports()
    assert not problems, "imports against the groups' order:\n" + "\n".join(problems)


def test_the_check_names_an_upward_import(tmp_path):
    runs = tmp_path / "sim" / "runs"
    runs.mkdir(parents=True)
    (runs / "api.py").write_text(
        "from sim.model import scenario\n\n\ndef draw():\n    from sim import show\n"
    )
    assert upward_imports(tmp_path / "sim") == [
        "sim/runs/api.py:5 (runs) imports sim.show (show), a group above it"
    ]
