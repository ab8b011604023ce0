"""`trainsim fit` as a user follows it on a real log: the fit with `--check` and `--like`,
the fleet it writes run back with `--incidents`, and that run's log fitted again."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml

from sim.model.scenario import load_scenario
from tests.conftest import ROOT, cli_in_process, flat

LANL = ROOT / "examples" / "lanl-system20.csv"
WINDOW = ["--start", "2001-12-01T00:00:00", "--end", "2005-09-10T00:00:00"]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("sys20") / "fit"
    result = cli_in_process(
        ["fit", str(LANL), "--nodes", "512", "--gpus-per-node", "1", *WINDOW, "--out", str(out),
         "--check", "--check-replicas", "4", "--workers", "1", "--like",
         str(ROOT / "scenarios" / "llama7b-128.yaml")],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out, result


def test_the_check_prints_the_log_beside_the_model_with_a_verdict_each(fitted):
    out, result = fitted
    text = re.sub("[│┃]", " ", result.stdout)
    for measure in ("failures: hardware", "node-hours down", "quarter 1 of the window",
                    "10% most-failing nodes", "nodes that never fail",
                    "within a day of the node's previous one"):  # fmt: skip
        (line,) = [x for x in text.splitlines() if measure in x]
        assert re.search(r"\b(within|OFF)\s*$", line), line
    summary = [x for x in text.splitlines() if x.startswith("check: ")]
    assert summary and re.match(r"check: \d+ of 11 measures within", summary[0]), summary
    doc = json.loads((out / "fit.json").read_text())
    assert doc["check"]["judged"] == 11 and len(doc["check"]["measures"]) == 14
    assert (out / "figures" / "check.png").stat().st_size > 10_000


def test_like_writes_the_users_scenario_with_the_fit_in_place(fitted):
    out, result = fitted
    scenario = load_scenario(out / "scenario.yaml").base  # it loads as written
    names = {f.name for f in scenario.failures}
    assert {"hardware", "software", "unknown"} <= names
    assert scenario.cluster.aging is not None and scenario.cluster.aging.beta < 1
    assert scenario.cluster.aging.age_days is None  # the fleet as of the log's end
    assert scenario.cluster.node_rate_cv > 0
    assert (
        scenario.model.params
        == load_scenario(ROOT / "scenarios/llama7b-128.yaml").base.model.params
    )
    # a node class keeps a node's rate on 8-GPU nodes: its rate per GPU-day is an eighth
    fragment = yaml.safe_load((out / "fitted.yaml").read_text())
    written = {f["name"]: f["rate_per_1k_gpu_day"] for f in fragment["failures"]}
    hardware = next(f for f in scenario.failures if f.name == "hardware")
    assert hardware.rate_per_1k_gpu_day == pytest.approx(written["hardware"] / 8, rel=1e-3)
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("use it:")]
    assert line.endswith(str(out / "scenario.yaml")) and "--set" not in line


def test_the_fleet_runs_back_and_its_log_fits_again(fitted, tmp_path):
    out, _ = fitted
    fleet = yaml.safe_load((out / "fleet.yaml").read_text())
    assert fleet["simulation"]["until"] == "horizon"
    assert fleet["cluster"]["nodes"] == 512 and fleet["cluster"]["spare_nodes"] == 0
    ran = cli_in_process(
        ["run", str(out / "fleet.yaml"), "--incidents", "--replicas", "2", "--out",
         str(tmp_path / "runs"), "--no-progress", "--no-figures"],
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    (run,) = (tmp_path / "runs").glob("*/*")
    log = pd.read_parquet(run / "incidents.parquet")
    assert {"time", "node", "class", "repair_hours"} <= set(log.columns)
    # the window's hours, every node of the fleet and no other
    assert log["time"].max() <= 1379 * 24 and log["node"].between(0, 511).all()
    assert 1500 < (log["replica"] == 0).sum() < 3500
    again = cli_in_process(
        ["fit", str(run / "incidents.parquet"), "--replica", "0", "--out", str(tmp_path / "f2"),
         "--json"],
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    # the run's fleet age (its scenario's cluster.aging.age_days) is the fit's
    assert doc["trend"]["fleet_age_at_start_days"] == pytest.approx(
        fleet["cluster"]["aging"]["age_days"]
    )


def test_a_fleet_age_that_is_not_a_number_is_refused(tmp_path):
    result = cli_in_process(
        ["fit", str(LANL), "--nodes", "512", *WINDOW, "--fleet-age-days", "old", "--out",
         str(tmp_path / "f")],
    )  # fmt: skip
    assert result.returncode == 2 and "--fleet-age-days" in flat(result.stderr)
