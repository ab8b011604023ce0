"""The step model at the command line (in-process): configurations that cannot run are
refused with exit 2, the key path and the numbers; near the memory limit they run and
calc, validate, run and plan warn; `calc` prints the calibration, the MFU at the
configuration it runs, the batch split and the GPU memory."""

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
    # fewer microbatches than stages run (1F1B, test_fewer_microbatches_than_stages_run);
    # 16 sequences a microbatch are refused for their activations
    "fewer microbatches than stages, memory": (
        ["--set", "parallelism.micro_batch_size=16"],
        "parallelism",
        ["need 101.1 GB per GPU", "2 microbatches in flight on the first stage", "recompute: full"],
    ),
    "tensor x pipeline": (
        ["--set", "parallelism.pipeline=3"],
        "parallelism",
        ["tensor*pipeline = 24", "1024 GPUs", "128*8"],
    ),
    # beyond the estimate's uncertainty (within it: test_calc_warns_near_the_memory_limit)
    "memory": (
        ["--set", "parallelism.tensor=1"],
        "parallelism",
        [
            "need 162.4 GB per GPU",
            "H100-SXM's 80 GB by 82.4 GB",
            "uncertainty of 8.0 GB",
            "weights 35.0",
            "activations 91.3",
        ],
    ),
    "memory, interleaved": (
        ["--set", "parallelism.tensor=2", "--set", "parallelism.virtual_stages=2"],
        "parallelism",
        [
            "need 98.8 GB per GPU",
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
        ["mfu 0.95", "step of 1.971 s", "compute efficiency of 2.928"],
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


def test_fewer_microbatches_than_stages_run():
    """1F1B with 2 microbatches on 4 stages runs (Megatron warms up with min(p - rank - 1, m)
    forward passes): the pipeline never fills, and the bubble is (p - 1)/m = 3/2 of the busy
    time. Full recompute keeps 16 sequences a microbatch within memory."""
    args = ["--set", "parallelism.micro_batch_size=16", "--set", "parallelism.recompute=full"]
    r = calc(REFERENCE, *args)
    assert r.returncode == 0, r.stderr
    assert "2 (pipeline bubble 150.0%)" in r.stdout
    (point,) = json.loads(calc(REFERENCE, *args, "--json").stdout)["points"]
    assert point["microbatches"] == 2.0 and point["bubble_share"] == 3 / 2


# tensor 2: the memory estimate, 81.7 GB, is within its uncertainty (10%, 8 GB) of the
# H100's 80 GB: the configuration runs, and every command says the margin on stderr
NEAR_THE_LIMIT = ["--set", "parallelism.tensor=2"]
MEMORY_WARNING = (
    "warning: parallelism: the memory estimate, 81.7 GB per GPU, is 1.7 GB more than the "
    "H100-SXM's 80 GB, within the estimate's uncertainty of 8.0 GB"
)


def test_calc_warns_near_the_memory_limit():
    r = calc(REFERENCE, *NEAR_THE_LIMIT)
    assert r.returncode == 0, r.stderr
    assert MEMORY_WARNING in r.stderr and "weights 17.5" in r.stderr, r.stderr
    assert "81.7 of 80 GB" in r.stdout
    as_json = calc(REFERENCE, *NEAR_THE_LIMIT, "--json")
    assert as_json.returncode == 0 and MEMORY_WARNING in as_json.stderr
    (point,) = json.loads(as_json.stdout)["points"]
    assert point["memory_warning"] in as_json.stderr
    assert point["memory_margin_GB"] == pytest.approx(-1.7, abs=0.05)
    assert "memory estimate" not in calc(REFERENCE).stderr


def test_validate_warns_near_the_memory_limit_naming_the_file():
    r = cli_in_process(["validate", REFERENCE, *NEAR_THE_LIMIT])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok: ")
    named = MEMORY_WARNING.replace("warning: ", f"warning: {REFERENCE}: ")
    assert named in r.stderr, r.stderr
    assert "memory estimate" not in cli_in_process(["validate", REFERENCE]).stderr


def test_run_warns_near_the_memory_limit_before_it_runs(tmp_path):
    """Said as the run starts (not among the points that cannot finish); a slice of a
    sweep (--points) hears only of its own points."""
    quick = ["--replicas", "2", "--workers", "1", "--executor", "serial", "--no-progress",
             "--no-figures", "--out", str(tmp_path)]  # fmt: skip
    r = cli_in_process(["run", REFERENCE, *NEAR_THE_LIMIT, *quick])
    assert r.returncode == 0, r.stderr
    assert MEMORY_WARNING in r.stderr and "cannot finish" not in r.stderr, r.stderr
    assert "answer: p50" in r.stdout
    sweep = ["--param", "parallelism.tensor=8,2"]
    first = cli_in_process(["run", REFERENCE, *sweep, "--points", "0:1", *quick])
    assert first.returncode == 0 and "memory estimate" not in first.stderr, first.stderr
    second = cli_in_process(["run", REFERENCE, *sweep, "--points", "1:2", *quick])
    assert second.returncode == 0, second.stderr
    assert "warning: sweep point {'parallelism.tensor': 2}: parallelism: the memory" in (
        second.stderr
    )


def test_plan_warns_near_the_memory_limit_at_the_points_it_concerns(tmp_path):
    args = ["plan", REFERENCE, "--vary", "parallelism.tensor=2,8", "--deadline-days", "60",
            "--replicas-first", "2", "--replicas-max", "2", "--workers", "1", "--executor",
            "serial", "--no-progress", "--out", str(tmp_path)]  # fmt: skip
    r = cli_in_process(args)
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if "memory estimate" in line]
    assert len(warnings) == 1, r.stderr
    assert warnings[0].startswith(
        "warning: sweep point {'parallelism.tensor': 2}: parallelism: the memory estimate, "
        "81.7 GB per GPU"
    )


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
    # the MFU at 256 nodes, a percentage as `run` reads effective MFU
    assert "40.3%" in text.split("MFU model")[0].split("MFU")[-1]
    assert "built up, calibrated at cluster.nodes=128" in text
    assert "73.1% of peak (calibrated: MFU 45.0% there)" in text
    assert "16 (pipeline bubble 18.8%)" in text
    assert "20.7 of 80 GB" in text
    own = calc(REFERENCE).stdout
    assert "calibrated at this configuration" in own and "45.0%" in own


def test_calc_json_carries_the_calibration():
    r = calc(REFERENCE, "--set", "cluster.nodes=256", "--json")
    assert r.returncode == 0, r.stderr
    (point,) = json.loads(r.stdout)["points"]
    assert point["mfu_scaling"] == "model"
    assert point["mfu_at"] == {"cluster.nodes": 128} and point["reference_mfu"] == 0.45
    assert point["compute_efficiency"] == pytest.approx(0.7310, abs=5e-4)
    assert point["mfu"] == pytest.approx(0.4033, abs=5e-4)
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


def test_calc_says_where_the_step_goes_and_what_a_token_costs():
    r = calc(REFERENCE, "--set", "cluster.nodes=256")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    # 6N + 12·L·h·T: 6 x 70e9 = 4.2e11 and 12 x 80 x 8,192 x 4,096 = 3.221e10
    assert "4.522e+11 = 6N 4.2e+11 + attention 12·L·h·T 3.221e+10" in text
    assert "tokens trained" in text and "1.4e+12" in text
    assert "cost per GPU-hour" in text and "cost with failures (Daly, first order)" in text
    # the job's model FLOPs per second: MFU x 989.4 TFLOPS x 2,048 GPUs
    pflops = float(text.split("effective PFLOP/s (the job)")[1].split("│")[1].replace(",", ""))
    mfu = float(text.split("MFU model")[0].split("MFU")[-1].split("│")[1].strip(" %")) / 100
    assert pflops == pytest.approx(mfu * 989.4 * 2048 / 1e3, rel=2e-3)
    table = text[text.index("where the step's time goes") :]
    for part in ("compute", "pipeline bubble", "exposed data-parallel", "pipeline sends",
                 "tensor-parallel"):  # fmt: skip
        assert part in table
    (point,) = json.loads(calc(REFERENCE, "--set", "cluster.nodes=256", "--json").stdout)["points"]
    assert sum(point["step_parts_s"].values()) == pytest.approx(point["step_time_s"], rel=1e-9)
    assert point["dense_flops_per_token"] == 4.2e11
    assert point["effective_pflops"] == pytest.approx(point["mfu"] * 989.4 * 2048 / 1e3)


def test_calc_warns_above_the_best_measured_gemm_efficiency():
    """An MFU that needs more than the 80.3% of peak H100 BF16 GEMMs reach (MAMF)."""
    seven = str(ROOT / "scenarios/llama7b-128.yaml")
    r = calc(seven, "--set", "performance.mfu=0.85")
    assert r.returncode == 0, r.stderr
    # 0.894: the efficiency MFU 0.85 calibrates to, above the MFU for the communication,
    # the wait for the slowest GPU and the optimizer step
    assert "warning: the compute efficiency 0.894" in r.stderr and "above 0.803" in r.stderr
    assert "warning" not in calc(seven).stderr


def test_calc_prints_the_fit_to_measured_points(tmp_path):
    doc = yaml.safe_load(Path(REFERENCE).read_text())
    doc["performance"] = {
        "mfu": 0.46,
        "measured": [
            {"mfu": 0.45, "at": {"cluster.nodes": 128}},
            {"mfu": 0.41, "at": {"cluster.nodes": 256}},
        ],
    }
    doc["cluster"]["nodes"] = 64
    (tmp_path / "fit.yaml").write_text(yaml.safe_dump(doc))
    r = calc("fit.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    table = r.stdout[r.stdout.index("fitted to the measured points") :]
    assert "cluster.nodes=256" in table and "0.4100" in table and "residual" in table


def test_calc_beside_a_run_gives_the_cost_its_replicas_measured(tmp_path):
    """calc --run: the mean and p95 of the run's cost_usd (recomputed from its table),
    beside Daly's first-order estimate; a run of another scenario is refused, exit 2."""
    import pandas as pd

    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    r = cli_in_process(
        [
            "run",
            "tiny.yaml",
            "--replicas",
            "8",
            "--workers",
            "1",
            "--out",
            "out",
            "--no-progress",
        ],  # fmt: skip
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "out" / "tiny").iterdir()
    costs = pd.read_parquet(run / "replicas.parquet")["cost_usd"]
    out = calc("tiny.yaml", "--run", str(run), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (point,) = json.loads(out.stdout)["points"]
    assert point["run_cost_usd"]["replicas"] == 8
    assert point["run_cost_usd"]["mean"] == pytest.approx(costs.mean(), rel=1e-12)
    assert point["run_cost_usd"]["p95"] == pytest.approx(costs.quantile(0.95), rel=1e-12)
    text = calc("tiny.yaml", "--run", str(run), cwd=tmp_path).stdout
    assert "cost with failures (the run: 8 replicas)" in text
    other = dict(TINY, name="other")
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    refused = calc("other.yaml", "--run", str(run), cwd=tmp_path)
    assert refused.returncode == 2 and "give a run of this scenario" in refused.stderr
    missing = calc("tiny.yaml", "--run", str(tmp_path), cwd=tmp_path)
    assert missing.returncode == 2 and "run.json" in missing.stderr
    assert "Traceback" not in missing.stderr + refused.stderr
