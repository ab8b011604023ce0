"""The commands as a user types them (subprocesses of `python -m sim`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sim.model.hardware import TIERS
from sim.model.scenario import load_scenario
from sim.runs.montecarlo import COLUMNS
from tests.conftest import (
    ROOT,
    TIMELINE_DOWNTIME,
    TIMELINE_NODE_WAITS,
    TINY,
    cli_in_process,
    merge,
)

REFERENCE = str(ROOT / "scenarios/llama70b-1k.yaml")


def trainsim(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sim", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def cli_in_process_args(*args: str) -> subprocess.CompletedProcess:
    return cli_in_process(list(args))


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
    # the summary's statistics are those of the table's 30 times to train
    days = table["time_to_train_days"]
    expected = {
        "mean": days.mean(),
        "std": days.std(ddof=1),
        "sem": days.std(ddof=1) / len(days) ** 0.5,
        **{f"p{q}": days.quantile(q / 100) for q in (5, 50, 95, 99)},
    }
    assert stats == pytest.approx(expected, rel=1e-12)


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


def test_timeline_is_replica_0_of_the_table(tmp_path):
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
    (row,) = one_table(tmp_path).query("replica == 0").itertuples()
    assert row.finished and row.failures > 0  # seed 42: replica 0 restarts a few times

    # the events (microseconds) tile the wall clock of replica 0 on one track
    end_us = 0.0
    for e in sorted(events, key=lambda e: e["ts"]):
        assert e["ts"] == pytest.approx(end_us, abs=1.0), e
        assert e["dur"] >= 0
        end_us = e["ts"] + e["dur"]
    assert end_us == pytest.approx(row.wall_hours * 3.6e9, rel=1e-12)

    # the time of each kind of event is the row's time bucket
    def hours(*names):
        return sum(e["dur"] for e in events if e["name"] in names) / 3.6e9

    assert {e["name"] for e in events} <= {"train", "lost work", *TIMELINE_DOWNTIME}
    assert hours("train") == pytest.approx(
        row.ideal_hours + row.slowdown_hours + row.checkpoint_stall_hours, rel=1e-9
    )
    assert hours("lost work") == pytest.approx(row.lost_work_hours, rel=1e-9)
    assert hours(*TIMELINE_DOWNTIME) == pytest.approx(row.downtime_hours, rel=1e-9)
    assert hours(*TIMELINE_NODE_WAITS) == pytest.approx(row.node_wait_hours, abs=1e-12)

    # each restart is an event, each after a detection (no maintenance or health checks here)
    # of a failure of a class in the row
    names = [e["name"] for e in events]
    assert names.count("restart") == names.count("detect") == row.restarts
    detected = Counter(e["args"]["cause"] for e in events if e["name"] == "detect")
    for name, count in detected.items():
        assert count <= getattr(row, f"failures_{name}")


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
    # in this process (quick); the first case also through the real command
    text, path = BAD[case]
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(_with(text))
    out = tmp_path / "results"
    run = trainsim if case == sorted(BAD)[0] else cli_in_process_args
    for command in (["validate", str(scenario)], ["run", str(scenario), "--out", str(out)]):
        r = run(*command)
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
    # static routes keep the halved cable's flows on it (adaptive routing spreads them)
    r = trainsim("fabric", REFERENCE, "--degrade", "leaf0-spine0=0.5", "--json",
                 "--set", "network.routing=static")  # fmt: skip
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
    assert len(doc["points"]) == 3
    # recomputed from the table: the mean of each point, and the runner-up's difference to the
    # best paired replica by replica (the same replicas see the same failures at every point)
    table = pd.read_parquet(Path(doc["run_dir"]) / "replicas.parquet")
    days = table.pivot(
        index="replica", columns="checkpoint.interval_minutes", values="time_to_train_days"
    ).dropna()  # replicas that finished at every point
    assert len(days) == 60
    means = days.mean().sort_values()
    assert list(means.index) == [p["checkpoint.interval_minutes"] for p in doc["points"]]
    assert [p["mean"] for p in doc["points"]] == pytest.approx(list(means), rel=1e-12)
    paired = days[doc["runner_up"]] - days[doc["best"]]
    half = 1.96 * paired.std(ddof=1) / len(paired) ** 0.5
    assert doc["runner_up"] == means.index[1]
    assert doc["difference"] == pytest.approx(paired.mean(), rel=1e-9)
    assert doc["difference_ci"] == pytest.approx([paired.mean() - half, paired.mean() + half])
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


def _calc(*overrides: str) -> tuple[dict, str]:
    args = ["calc", REFERENCE, "--json"]
    for item in overrides:
        args += ["--set", item]
    r = cli_in_process_args(*args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["points"][0], r.stderr


def test_calc_with_another_storage_kind_uses_that_presets_figures():
    base = load_scenario(REFERENCE).base
    nodes, client = base.cluster.nodes, base.storage.client_GB_s_per_node
    file_tier = base.storage.checkpoint_tier  # lustre, with the file's own bandwidths

    def expected(latency_ms: float, write_GB_s: float, read_GB_s: float, size_GB: float):
        return (
            latency_ms / 1e3 + size_GB / min(write_GB_s, nodes * client),
            latency_ms / 1e3 + size_GB / min(read_GB_s, nodes * client),
        )

    lustre, notes = _calc()
    assert notes == ""
    size = lustre["checkpoint_GB"]
    assert (lustre["checkpoint_write_s"], lustre["checkpoint_load_s"]) == pytest.approx(
        expected(file_tier.latency_ms, file_tier.write_GB_s, file_tier.read_GB_s, size), rel=1e-12
    )
    for kind in ("nfs", "weka", "gpfs"):
        point, notes = _calc(f"storage.checkpoint_tier.kind={kind}")
        preset = TIERS[kind]
        want = expected(preset.latency_ms, preset.write_GB_s, preset.read_GB_s, size)
        assert (point["checkpoint_write_s"], point["checkpoint_load_s"]) == pytest.approx(
            want, rel=1e-12
        )
        # against the file's lustre tier: the difference is exactly the bandwidths' (and latencies')
        assert point["checkpoint_write_s"] - lustre["checkpoint_write_s"] == pytest.approx(
            size / preset.write_GB_s
            - size / file_tier.write_GB_s
            + (preset.latency_ms - file_tier.latency_ms) / 1e3,
            rel=1e-9,
        )
        assert notes.strip() == (
            f"note: storage.checkpoint_tier.kind={kind}: starts from the {kind} preset; "
            f"dropped the file's write_GB_s={file_tier.write_GB_s:g}, "
            f"read_GB_s={file_tier.read_GB_s:g}"
        )
    nfs = TIERS["nfs"]
    assert (
        _calc("storage.checkpoint_tier.kind=nfs")[0]["checkpoint_write_s"]
        > 10 * (lustre["checkpoint_write_s"])
    )  # NFS no longer scores like Lustre
    # the same kind changes nothing
    assert _calc("storage.checkpoint_tier.kind=lustre") == (lustre, "")
    # a figure given together with the kind wins over the preset, in either order
    for pair in (["kind=nfs", "write_GB_s=7"], ["write_GB_s=7", "kind=nfs"]):
        point, notes = _calc(*(f"storage.checkpoint_tier.{item}" for item in pair))
        assert point["checkpoint_write_s"] == pytest.approx(nfs.latency_ms / 1e3 + size / 7)
        assert point["checkpoint_load_s"] == pytest.approx(
            nfs.latency_ms / 1e3 + size / nfs.read_GB_s
        )
        assert "dropped the file's read_GB_s=150" in notes and "write_GB_s" not in notes


def test_validate_says_which_figures_a_kind_change_dropped():
    r = cli_in_process_args("validate", REFERENCE, "--set", "storage.checkpoint_tier.kind=object")
    assert r.returncode == 0 and r.stdout.startswith("ok:")
    assert "storage.checkpoint_tier.kind=object: starts from the object preset" in r.stderr


def test_a_sweep_of_the_storage_kind_gives_each_kind_its_own_row(tmp_path):
    r = cli_in_process_args(
        "run",
        REFERENCE,
        "--param",
        "storage.checkpoint_tier.kind=lustre,nfs,weka",
        "--replicas",
        "20",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
        "--json",
        "--no-figures",
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    for kind in ("nfs", "weka"):
        assert f"note: storage.checkpoint_tier.kind={kind} (sweep): starts from the {kind}" in (
            r.stderr
        )
    table = one_table(tmp_path)
    stall = table.groupby("storage.checkpoint_tier.kind")["checkpoint_stall_hours"].mean()
    assert len(table) == 60 and len(set(stall)) == 3
    # NFS (5 GB/s) stalls far longer than the file's Lustre (100 GB/s), Weka (200 GB/s) least
    assert stall["nfs"] > 10 * stall["lustre"] > 10 * stall["weka"]
    # the run's resolved scenario.yaml loads to the same points
    (resolved,) = list(tmp_path.rglob("scenario.yaml"))
    loaded = load_scenario(REFERENCE, params=["storage.checkpoint_tier.kind=lustre,nfs,weka"])
    again = load_scenario(resolved)
    assert [p.scenario.storage for p in again.points] == [p.scenario.storage for p in loaded.points]


def test_optimize_a_kind_with_a_set_figure_that_holds_at_every_candidate(tmp_path):
    # the --set figure is swept with its one value (so the run's scenario.yaml reproduces
    # it): a constant, not a second key to optimize over
    doc = merge(
        TINY,
        {
            "failures": [{"name": "node", "scope": "node", "mtbf_hours": 1.0, "repair_hours": 0.5}],
            "cluster": {"spare_nodes": 1},
        },
    )
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(doc))
    r = cli_in_process(
        ["optimize", "tiny.yaml", "--param", "storage.checkpoint_tier.kind=lustre,weka",
         "--set", "storage.checkpoint_tier.write_GB_s=50", "--replicas", "4",
         "--workers", "1", "--out", "out", "--no-progress", "--json"],
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["key"] == "storage.checkpoint_tier.kind"
    assert sorted(p["storage.checkpoint_tier.kind"] for p in out["points"]) == ["lustre", "weka"]
    loaded = load_scenario(tmp_path / out["run_dir"] / "scenario.yaml")
    assert loaded.swept_keys == [
        "storage.checkpoint_tier.kind",
        "storage.checkpoint_tier.write_GB_s",
    ]
    assert loaded.varied_keys == ["storage.checkpoint_tier.kind"]
    assert [p.scenario.storage.checkpoint_tier.write_GB_s for p in loaded.points] == [50, 50]
    # a second key with several values is still refused
    (tmp_path / "two.yaml").write_text(
        yaml.safe_dump(merge(doc, {"sweep": {"cluster.nodes": [2, 4]}}))
    )
    r = cli_in_process(["optimize", "two.yaml", "--param", "storage.checkpoint_tier.kind=lustre,weka"],
                       tmp_path)  # fmt: skip
    assert r.returncode == 2 and "the scenario sweeps cluster.nodes" in r.stderr
