"""The README's way from `fit` to a run carries every key the fit writes: its fit of the
example log, then its `trainsim run SCENARIO --set "failures=$(cat ...)" ...` line, run by a
shell as a user pastes it, give a run whose scenario has the fitted failure classes and the
cluster's lemon keys (a `--set failures=` alone drops the lemons)."""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest
import yaml

from tests.conftest import ROOT

README = ROOT / "README.md"
TRAINSIM = ROOT / ".venv/bin/trainsim"


def readme_sh_lines() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_readme_fit_then_run_gives_the_run_every_fitted_key(tmp_path):
    if not TRAINSIM.exists():
        pytest.skip("needs the README's .venv install")
    lines = readme_sh_lines()
    (fit_line,) = [
        line for line in lines if line.startswith(".venv/bin/trainsim fit examples/incidents.csv")
    ]
    (run_line,) = [line for line in lines if "failures=$(cat results/fit/failures.yaml)" in line]
    assert "--like" not in fit_line  # the fit the run line follows writes results/fit/

    # the fit as the README gives it, into a temporary results/fit
    fit_out = tmp_path / "results" / "fit"
    args = shlex.split(fit_line)
    r = subprocess.run(
        [str(ROOT / args[0]), *args[1:], "--out", str(fit_out), "--no-figures"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    fitted = yaml.safe_load((fit_out / "fitted.yaml").read_text())
    assert fitted["cluster"], "the example log's fit has lemons: the test needs them"

    # the run line as pasted into a shell from a directory holding that results/fit
    command = run_line.replace("trainsim run SCENARIO", shlex.join(
        [str(TRAINSIM), "run", str(ROOT / "scenarios/llama7b-128.yaml")]
    ))  # fmt: skip
    command += " " + shlex.join(
        ["--replicas", "2", "--no-figures", "--no-progress", "--out", str(tmp_path / "runs")]
    )
    r = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    (run_dir,) = (tmp_path / "runs").glob("*/*")
    scenario = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    for key, value in fitted["cluster"].items():  # lemon_fraction, ..._multiplier, permanent
        assert scenario["cluster"][key] == value, (key, run_line)
    names = [f["name"] for f in scenario["failures"]]
    assert names == [f["name"] for f in fitted["failures"]]
    for written, ran in zip(fitted["failures"], scenario["failures"], strict=True):
        assert {k: ran[k] for k in written} == written
