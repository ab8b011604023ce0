"""The README's own commands: the quick start is what CI runs, and each command runs."""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"


def readme_commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith(".venv/bin/trainsim")]


def test_readme_quick_start_is_what_ci_runs():
    text = README.read_text()
    test_command = (
        "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/python -m pytest"
    )
    assert test_command in text
    assert test_command in (ROOT / ".ci/run").read_text()
    assert ".venv/bin/trainsim run scenarios/llama70b-1k.yaml" in text


@pytest.mark.parametrize("command", readme_commands())
def test_readme_commands_run(command, tmp_path):
    if not (ROOT / ".venv/bin/trainsim").exists():
        pytest.skip("needs the README's .venv install")
    args = shlex.split(command)
    if "*" in command:
        args = args[:-1] + [str(p) for p in sorted(ROOT.glob(args[-1]))]
    if args[1] in ("run", "optimize", "plan", "fit"):
        args += ["--out", str(tmp_path)]  # keep the repository's results/ clean
    if args[1] == "run":
        args += ["--no-figures"]
    r = subprocess.run(
        [str(ROOT / args[0]), *args[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
