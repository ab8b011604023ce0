"""`trainsim calc` answers for every shipped scenario (scenarios/ and scenarios/published/,
every sweep point) and for the smallest jobs: one node with no communication between nodes,
one GPU, no failures at all. Its breakdown of the step adds up to the step and shows the
slowest-GPU and optimizer-step terms. (A one-node, tensor 8, pipeline 1 job once crashed in
`compose_at_compute_s`: a step with no traffic at all solved for its compute.)"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from sim.model import calculator, perf
from sim.model.scenario import load_document, load_scenario
from tests.conftest import ROOT, TINY, cli_in_process, merge

SHIPPED = sorted((ROOT / "scenarios").glob("*.yaml")) + sorted(
    (ROOT / "scenarios" / "published").glob("*.yaml")
)

ONE_NODE = merge(
    TINY,
    {
        "name": "one-node",
        "model": {"params": 8.0e9, "tokens": 1.0e11, "global_batch_tokens": 1048576},
        "cluster": {"gpu": "H100-SXM", "nodes": 1, "gpus_per_node": 8},
        "parallelism": {"tensor": 8, "pipeline": 1},
        "performance": {"mfu": 0.5},
        "simulation": {"horizon_days": 3650},
    },
)
ONE_NODE["model"]["seq_len"] = 4096  # sequences, but no shape: no tensor-parallel traffic
ONE_GPU = merge(
    TINY,
    {
        "name": "one-gpu",
        "model": {"params": 1.0e8, "tokens": 1.0e9, "global_batch_tokens": 65536},
        "cluster": {"gpu": "H100-SXM", "nodes": 1, "gpus_per_node": 1},
        "network": {"nics_per_node": 1},
        "performance": {"mfu": 0.4},
    },
)
ONE_GPU["model"].update({"seq_len": 2048, "layers": 12, "hidden": 768})
# the tiny job, no failure classes at all (failures: [])
NO_FAILURES = merge(TINY, {"name": "no-failures"})


def calc_json(path) -> dict:
    """`trainsim calc PATH --json`, as the entry point runs it (in this process)."""
    result = cli_in_process(["calc", str(path), "--json"])
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_calc_answers_for_every_shipped_scenario(path):
    doc = calc_json(path)
    loaded = load_scenario(path)
    assert len(doc["points"]) == len(loaded.points)
    for point, answer in zip(loaded.points, doc["points"], strict=True):
        if point.infeasible:
            assert answer["infeasible"] == point.infeasible
            continue
        parts = answer["step_parts_s"]
        assert {"slowest GPU", "optimizer step"} <= set(parts)
        assert sum(parts.values()) == pytest.approx(answer["step_time_s"], rel=1e-9)
        assert 0 < answer["mfu"] < 1


@pytest.mark.parametrize(
    ("doc", "gpus"), [(ONE_NODE, 8), (ONE_GPU, 1), (NO_FAILURES, 4)], ids=lambda v: str(v)[:12]
)
def test_calc_answers_for_the_smallest_jobs(tmp_path, doc, gpus):
    path = tmp_path / f"{doc['name']}.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    answer = calc_json(path)["points"][0]
    assert answer["gpus"] == gpus and answer["data_parallel_size"] >= 1
    assert math.isfinite(answer["step_time_s"]) and answer["step_time_s"] > 0
    assert answer["failures_per_day"] == 0.0  # no failure classes
    assert sum(answer["step_parts_s"].values()) == pytest.approx(answer["step_time_s"], rel=1e-9)


def test_a_step_without_any_traffic_is_all_compute():
    """One node, tensor 8, no model shape: nothing to communicate; the stated MFU's step is
    the compute, the slowest of the 8 GPUs (2% spread) and the optimizer step."""
    s = load_document(ONE_NODE, "one-node").base
    parts = perf.step_parts(s)
    assert parts.tensor_parallel_s == parts.data_parallel_s == 0.0
    zero = perf.compose_at_compute_s(parts, 0.0)
    assert zero.step_s == parts.optimizer_s  # solving for the compute starts from here
    nothing = perf.compose_at_compute_s(replace(parts, optimizer_s=0.0), 0.0)
    assert nothing.step_s == 0.0 and nothing.mfu == math.inf  # no division by zero
    c = calculator.calculate(s)
    assert c.mfu == 0.5
    assert c.step_parts_s["compute"] > 0 and c.step_parts_s["slowest GPU"] > 0
