"""The step model at the command line (in-process): configurations that cannot run are
refused with exit 2, the key path and the numbers; `calc` prints the calibration, the
MFU at the configuration it runs, the batch split and the GPU memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, TINY, cli_in_process

REFERENCE = str(ROOT / "scenarios/llama70b-1k.yaml")


def calc(*args: str, cwd=None):
    return cli_in_process(["calc", *args], cwd)


REFUSALS = {
    # 1,024 sequences over 250 replicas: the batch does not split
    "batch split": (
        ["--set", "cluster.nodes=1000"],
        "model.global_batch_tokens",
        ["1,024 sequences", "250 data-parallel replicas", "4.096 sequences per replica"],
    ),
    "explicit microbatches": (
        ["--set", "parallelism.microbatches=16"],
        "parallelism.microbatches",
        ["16 disagrees", "1,024 sequences / 32", "= 32 microbatches"],
    ),
    "fewer microbatches than stages": (
        ["--set", "parallelism.micro_batch_size=16"],
        "parallelism.pipeline",
        ["2 microbatches per data-parallel replica", "micro_batch_size 16", "4 pipeline stages"],
    ),
    "tensor x pipeline": (
        ["--set", "parallelism.pipeline=3"],
        "parallelism",
        ["tensor*pipeline = 24", "1024 GPUs", "128*8"],
    ),
    "memory": (
        ["--set", "parallelism.tensor=2"],
        "parallelism",
        ["need 99.0 GB per GPU", "H100-SXM's 80 GB", "weights 17.5", "activations 45.6"],
    ),
    "memory, interleaved": (
        ["--set", "parallelism.tensor=2", "--set", "parallelism.virtual_stages=2"],
        "parallelism",
        [
            "need 116.1 GB per GPU",
            "activations 62.7 (recompute selective, 4 microbatches in flight on the first "
            "stage x 1.375 for the interleaved schedule of virtual_stages 2)",
        ],
    ),
    "batch of no whole sequences": (
        ["--set", "model.global_batch_tokens=4194305"],
        "model.global_batch_tokens",
        ["4,194,305 tokens per step", "seq_len = 4,096 (1,024.000244)"],
    ),
    "tensor wider than a node": (
        ["--set", "parallelism.tensor=16"],
        "parallelism.tensor",
        ["tensor = 16 spans nodes", "cluster.gpus_per_node = 8 GPUs; use tensor <= 8"],
    ),
    "mfu no efficiency reaches": (
        ["--set", "performance.mfu=0.95"],
        "performance.mfu",
        ["mfu 0.95", "step of 1.971 s", "compute efficiency of 2.31"],
    ),
    "mfu_at key": (
        ["--set", "performance.mfu_at={cluster.nodez: 64}"],
        "performance.mfu_at.cluster.nodez",
        ["does not exist in the schema"],
    ),
    "mfu_at configuration": (
        ["--set", "performance.mfu_at={cluster.nodes: 96}"],
        "performance.mfu_at",
        ["measured at cannot run", "24 data-parallel replicas"],
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_a_configuration_that_cannot_run_is_refused(name):
    args, key, words = REFUSALS[name]
    r = calc(REFERENCE, *args)
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-500:])
    assert "Traceback" not in r.stderr + r.stdout
    assert f"llama70b-1k.yaml: {key}: " in r.stderr, r.stderr
    for word in words:
        assert word in r.stderr, (word, r.stderr)
    assert r.stdout == ""


def test_a_sweep_marks_points_that_cannot_run_and_refuses_when_none_can(tmp_path):
    doc = yaml.safe_load(Path(REFERENCE).read_text())
    doc["sweep"] = {"cluster.nodes": [96, 128]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    r = calc("s.yaml", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    first, second = json.loads(r.stdout)["points"]
    assert first["infeasible"].startswith("model.global_batch_tokens: the batch of 1,024")
    assert second["mfu"] == 0.45
    doc["sweep"] = {"cluster.nodes": [96, 192]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    r = calc("s.yaml", cwd=tmp_path)
    assert r.returncode == 2
    assert "model.global_batch_tokens" in r.stderr and "none of the 2 sweep points" in r.stderr


def test_calc_prints_the_calibration_and_the_mfu_it_runs_at():
    r = calc(REFERENCE, "--set", "cluster.nodes=256")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "2,048 (64)" in text  # GPUs (data-parallel replicas)
    assert "0.411" in text.split("MFU model")[0].split("MFU")[-1]  # the MFU at 256 nodes
    assert "built up, calibrated at cluster.nodes=128" in text
    assert "0.666 (calibrated: MFU 0.45 there)" in text
    assert "16 (pipeline bubble 18.8%)" in text
    assert "24.9 of 80 GB" in text
    own = calc(REFERENCE).stdout
    assert "calibrated at this configuration" in own and "0.450" in own


def test_calc_json_carries_the_calibration():
    r = calc(REFERENCE, "--set", "cluster.nodes=256", "--json")
    assert r.returncode == 0, r.stderr
    (point,) = json.loads(r.stdout)["points"]
    assert point["mfu_scaling"] == "model"
    assert point["mfu_at"] == {"cluster.nodes": 128} and point["reference_mfu"] == 0.45
    assert point["compute_efficiency"] == pytest.approx(0.666, abs=5e-4)
    assert point["mfu"] == pytest.approx(0.411, abs=5e-4)
    assert point["microbatches"] == 16.0 and point["bubble_share"] == 3 / 16
    fixed = calc(REFERENCE, "--set", "cluster.nodes=256", "--set",
                 "performance.mfu_scaling=fixed", "--json")  # fmt: skip
    (point,) = json.loads(fixed.stdout)["points"]
    assert point["mfu_scaling"] == "fixed" and point["mfu"] == 0.45


def test_calc_says_in_one_line_that_an_abstract_job_keeps_its_mfu(tmp_path):
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    r = calc("tiny.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if "abstract job" in line]
    assert len(lines) == 1 and "MFU model" in lines[0] and "no model.seq_len" in lines[0]
    assert "microbatches per replica" not in r.stdout
