"""The commands as a user types them (subprocesses of `python -m sim`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sim.montecarlo import COLUMNS
from tests.conftest import ROOT

REFERENCE = str(ROOT / "scenarios/llama70b-1k.yaml")


def trainsim(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sim", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def one_table(out: Path) -> pd.DataFrame:
    (path,) = list(out.rglob("replicas.parquet"))
    return pd.read_parquet(path)


def test_run_json_prints_only_the_documented_summary(tmp_path):
    r = trainsim(
        "run",
        REFERENCE,
        "--replicas",
        "30",
        "--seed",
        "3",
        "--workers",
        "1",
        "--json",
        "--out",
        str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["scenario"] == "llama70b-1k" and doc["replicas"] == 30
    stats = doc["points"][0]["metrics"]["time_to_train_days"]
    assert set(stats) == {"mean", "std", "sem", "p5", "p50", "p95", "p99"}
    assert stats["p5"] <= stats["p50"] <= stats["p95"] <= stats["p99"]
    (run_dir,) = [p for p in (tmp_path / "llama70b-1k").iterdir()]
    names = {p.name for p in run_dir.iterdir()}
    assert names >= {"scenario.yaml", "replicas.parquet", "summary.csv", "summary.json", "figures"}
    table = one_table(tmp_path)
    assert [c for c in COLUMNS if c not in table.columns] == []
    assert {"failures_gpu", "failures_software"} <= set(table.columns)
    assert len(table) == 30 and table["finished"].all()
    parts = table[
        [
            "ideal_hours",
            "slowdown_hours",
            "lost_work_hours",
            "checkpoint_stall_hours",
            "downtime_hours",
        ]
    ].sum(axis=1)
    assert ((parts - table["wall_hours"]).abs() <= 1e-9 * table["wall_hours"]).all()


def test_run_prints_a_readable_summary_table(tmp_path):
    r = trainsim(
        "run",
        REFERENCE,
        "--replicas",
        "20",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
        "--no-figures",
    )
    assert r.returncode == 0, r.stderr
    for words in ["time to train (days)", "lost work (hours)", "goodput", "p95", "results:"]:
        assert words in r.stdout


def test_workers_1_and_2_give_identical_tables(tmp_path):
    tables = []
    for workers in ("1", "2"):
        out = tmp_path / workers
        r = trainsim(
            "run",
            REFERENCE,
            "--replicas",
            "60",
            "--seed",
            "5",
            "--workers",
            workers,
            "--param",
            "checkpoint.interval_steps=500,2000",
            "--out",
            str(out),
            "--no-figures",
            "--json",
        )
        assert r.returncode == 0, r.stderr
        tables.append(one_table(out))
    assert len(tables[0]) == 120
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_sweep_writes_sweep_figures_and_resolved_scenario(tmp_path):
    r = trainsim(
        "run",
        REFERENCE,
        "--replicas",
        "20",
        "--workers",
        "1",
        "--set",
        "cluster.spare_nodes=2",
        "--param",
        "checkpoint.interval_steps=250,1000,4000",
        "--out",
        str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    (run_dir,) = list((tmp_path / "llama70b-1k").iterdir())
    figures = {p.name for p in (run_dir / "figures").iterdir()}
    assert {
        "sweep_time_to_train_days.png",
        "time_to_train_cdf.png",
        "wall_time_breakdown.png",
    } <= figures
    resolved = (run_dir / "scenario.yaml").read_text()
    assert "spare_nodes: 2" in resolved and "checkpoint.interval_steps" in resolved
    table = one_table(tmp_path)
    assert sorted(table["checkpoint.interval_steps"].unique()) == [250, 1000, 4000]
    assert "best" in r.stdout


def test_timeline_opens_in_perfetto(tmp_path):
    r = trainsim(
        "run",
        REFERENCE,
        "--replicas",
        "2",
        "--workers",
        "1",
        "--timeline",
        "--no-figures",
        "--out",
        str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    (trace,) = list(tmp_path.rglob("timeline.json"))
    events = json.loads(trace.read_text())["traceEvents"]
    assert events and all(e["ph"] == "X" for e in events)


def test_calc_json():
    r = trainsim("calc", REFERENCE, "--json")
    assert r.returncode == 0, r.stderr
    point = json.loads(r.stdout)["points"][0]
    assert point["total_steps"] == 333787
    assert point["checkpoint_GB"] == pytest.approx(980.0)
    assert 30 < point["young_interval_minutes"] < 32
    r = trainsim("calc", REFERENCE)
    assert "ideal time to train" in r.stdout and "cost per 1B tokens" in r.stdout


def test_validate_all_shipped_scenarios():
    r = trainsim("validate", *map(str, sorted((ROOT / "scenarios").glob("*.yaml"))))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("ok:") == len(list((ROOT / "scenarios").glob("*.yaml")))


BAD = {
    "unknown key": ("model:\n  paramz: 3\n", "model.paramz"),
    "wrong type": ("cluster:\n  nodes: lots\n", "cluster.nodes"),
    "zero bandwidth": (
        "storage:\n  checkpoint_tier: {kind: lustre, write_GB_s: 0, read_GB_s: 1, capacity_TB: 9}\n",
        "storage.checkpoint_tier.write_GB_s",
    ),
    "two intervals": ("checkpoint:\n  interval_steps: 10\n  interval_minutes: 5\n", "checkpoint"),
    "does not fit": (
        "storage:\n  checkpoint_tier: {kind: lustre, write_GB_s: 1, read_GB_s: 1, capacity_TB: 0.01}\n",
        "storage.checkpoint_tier.capacity_TB",
    ),
    "negative rate": (
        "failures:\n  - {name: g, scope: gpu, rate_per_1k_gpu_day: -1}\n",
        "failures.0.rate_per_1k_gpu_day",
    ),
}

GOOD_BASE = """name: t
model: {params: 1.0e9, tokens: 1.0e9, global_batch_tokens: 1000000}
cluster: {gpu: H100-SXM, nodes: 2}
performance: {mfu: 0.4}
storage:
  checkpoint_tier: {kind: lustre, write_GB_s: 10, read_GB_s: 10, capacity_TB: 100}
checkpoint: {interval_steps: 100}
"""


def _with(section_yaml: str) -> str:
    import yaml

    doc = yaml.safe_load(GOOD_BASE)
    for key, value in yaml.safe_load(section_yaml).items():
        doc[key] = {**doc[key], **value} if isinstance(value, dict) and key in doc else value
    return yaml.safe_dump(doc)


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exit_2_one_message_no_traceback(tmp_path, case):
    text, path = BAD[case]
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(_with(text))
    out = tmp_path / "results"
    for command in (["validate", str(scenario)], ["run", str(scenario), "--out", str(out)]):
        r = trainsim(*command)
        assert r.returncode == 2, (case, r.stderr)
        assert "Traceback" not in r.stderr + r.stdout
        assert str(scenario) in r.stderr and path in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()  # nothing that could pass for results


def test_bad_override_and_not_yaml_and_missing_file(tmp_path):
    r = trainsim("run", REFERENCE, "--set", "checkpoint.interval_stepz=5")
    assert (
        r.returncode == 2
        and "checkpoint.interval_stepz" in r.stderr
        and "Traceback" not in r.stderr
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmodel: [unclosed\n")
    r = trainsim("validate", str(bad))
    assert r.returncode == 2 and "not valid YAML" in r.stderr
    r = trainsim("validate", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "cannot read" in r.stderr
    r = trainsim("run", REFERENCE, "--replicas", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_fabric_reports_sizing_collective_step_and_bottleneck():
    r = trainsim("fabric", REFERENCE, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["fat_tree"]["leaves"], doc["fat_tree"]["spines"]) == (32, 16)
    g = doc["gradient_allreduce"]
    assert g["simulated_s"] == pytest.approx(g["analytic_s"], rel=0.02)
    r = trainsim("fabric", REFERENCE, "--degrade", "leaf0-spine0=0.5", "--json")
    doc = json.loads(r.stdout)
    assert doc["bottlenecks"][0]["name"] == "leaf0-spine0.0"
    assert doc["step"]["what_if_step_s"] > doc["step"]["step_s"]
    r = trainsim("fabric", REFERENCE, "--fail-switch", "spine3")
    assert r.returncode == 0 and "most loaded links" in r.stdout and "bisection" in r.stdout


def test_fabric_bad_what_if_is_bad_input():
    r = trainsim("fabric", REFERENCE, "--degrade", "leaf0-spine999=0.5")
    assert r.returncode == 2 and "unknown link" in r.stderr and "Traceback" not in r.stderr


def test_optimize_reports_the_best_interval_with_a_paired_difference(tmp_path):
    r = trainsim(
        "optimize",
        REFERENCE,
        "--param",
        "checkpoint.interval_minutes=5,30,120",
        "--replicas",
        "60",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
        "--json",
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["key"] == "checkpoint.interval_minutes" and doc["best"] == 30
    low, high = doc["difference_ci"]
    assert doc["difference"] > 0 and low <= doc["difference"] <= high
    assert len(doc["points"]) == 3
    r = trainsim(
        "optimize",
        REFERENCE,
        "--param",
        "checkpoint.interval_minutes=30,60",
        "--statistic",
        "p95",
        "--replicas",
        "30",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
        "--no-progress",
    )
    assert r.returncode == 0 and "best checkpoint.interval_minutes" in r.stdout
    r = trainsim(
        "optimize",
        REFERENCE,
        "--param",
        "checkpoint.interval_minutes=30,60",
        "--statistic",
        "median",
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
