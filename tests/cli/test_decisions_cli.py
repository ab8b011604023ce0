"""What `optimize`, `calc`, `validate` and `run` print for the cases a new user tripped on:
the direction of a metric, ties, units, async checkpoints in the calculator, and a
horizon no replica can reach."""

from __future__ import annotations

import json

import pandas as pd

from tests.cli.test_cli import REFERENCE, trainsim
from tests.conftest import ROOT

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")


def flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


def test_optimize_maximises_goodput_and_prints_values_as_given(tmp_path):
    r = trainsim(
        "optimize", REFERENCE, "--param", "checkpoint.interval_steps=100,1000,20000",
        "--metric", "goodput", "--replicas", "40", "--workers", "1", "--no-progress",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "highest is best" in r.stdout
    assert "best checkpoint.interval_steps = 1000:" in flat(r.stdout)
    assert "1000.0" not in r.stdout and "20000.0" not in r.stdout
    rows = {line.split("│")[1].strip(): line for line in r.stdout.splitlines() if "│" in line}
    assert rows["1000"].rstrip("│ ").endswith("best")
    assert rows["20000"].rstrip("│ ").endswith("worse")

    r = trainsim(
        "optimize", REFERENCE, "--param", "checkpoint.interval_steps=100,1000,20000",
        "--metric", "goodput", "--minimize", "--replicas", "40", "--workers", "1",
        "--no-progress", "--out", str(tmp_path), "--json",
    )  # fmt: skip
    doc = json.loads(r.stdout)
    assert doc["direction"] == "min" and doc["best"] == 20000


def test_optimize_prints_costs_in_dollars(tmp_path):
    r = trainsim(
        "optimize", REFERENCE, "--param", "checkpoint.interval_steps=250,4000",
        "--metric", "cost_usd", "--replicas", "30", "--workers", "1", "--no-progress",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "mean cost" in r.stdout and "worse by $" in flat(r.stdout)
    assert "e+0" not in r.stdout


def test_optimize_says_when_values_tie(tmp_path):
    # without spares to wait for, the elastic floor never matters: every replica is identical
    r = trainsim(
        "optimize", REFERENCE, "--param", "recovery.elastic_min_fraction=0.5,0.75",
        "--replicas", "20", "--workers", "1", "--no-progress", "--out", str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = flat(r.stdout)
    assert "no single best recovery.elastic_min_fraction: 0.5, 0.75 tie" in out
    assert "tied for best" in out and "best recovery.elastic_min_fraction =" not in out


def test_calc_uses_the_blocking_cost_of_async_checkpoints():
    young = ["--set", "checkpoint.interval=young"]
    sync = json.loads(trainsim("calc", REFERENCE, *young, "--json").stdout)["points"][0]
    asyn = json.loads(
        trainsim("calc", REFERENCE, *young, "--set", "checkpoint.mode=async", "--json").stdout
    )["points"][0]
    # async blocks for the snapshot only: it cannot be expected to take longer than sync
    assert asyn["daly_expected_days"] < sync["daly_expected_days"]
    # and it is within a few hours of the ideal run (the snapshot is 0.15 s)
    assert asyn["daly_expected_days"] - asyn["ideal_days"] < 0.15


def test_an_impossible_horizon_is_refused_by_validate_calc_and_run(tmp_path):
    short = ["--set", "simulation.horizon_days=10"]
    for command in (["validate"], ["calc"], ["run", "--replicas", "5", "--out", str(tmp_path)]):
        r = trainsim(*command, REFERENCE, *short)
        assert r.returncode == 2, (command, r.stderr)
        err = flat(r.stderr)
        assert "simulation.horizon_days" in err and "16.07 days" in err
        assert "no replica can finish" in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())


def test_a_sweep_names_the_points_that_cannot_finish(tmp_path):
    r = trainsim(
        "run", REFERENCE, "--param", "simulation.horizon_days=10,30", "--replicas", "5",
        "--workers", "1", "--no-progress", "--out", str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "warning: sweep point {'simulation.horizon_days': 10}" in flat(r.stderr)
    assert "nan" not in r.stdout
    assert "— (none finished)" in r.stdout and "no replica finished" in flat(r.stdout)
    (parquet,) = tmp_path.rglob("replicas.parquet")
    table = pd.read_parquet(parquet)
    assert not table[table["simulation.horizon_days"] == 10]["finished"].any()


def test_validate_reports_every_bad_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "scenarios/llama7b-128.yaml").read_text() + "\nbogus: 1\n")
    worse = tmp_path / "worse.yaml"
    worse.write_text("name: [unclosed\n")
    r = trainsim("validate", str(bad), SMALL, str(worse))
    assert r.returncode == 2
    assert f"{bad}: bogus" in r.stderr and str(worse) in r.stderr
    assert f"ok: {SMALL}" in r.stdout and "2 of 3 scenario files are invalid" in r.stderr
