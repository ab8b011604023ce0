"""The built-up step model: the bubble and exposure formulas on hand-computed cases, the
calibration of `performance.mfu` at the scenario's own configuration (exact for every
shipped scenario), MFU that falls as a fixed batch spreads over more GPUs, the fixed and
abstract cases that keep today's proportional rule, `performance.mfu_at` through a run's
resolved scenario.yaml, the elastic shrink's step times, and the GPU memory formula."""

from __future__ import annotations

from dataclasses import replace
from statistics import NormalDist

import pytest

from sim.engine.plan import build_plan
from sim.model import batch, memory, network, perf
from sim.model.safe_yaml import parse_yaml
from sim.model.scenario import dump_resolved, load_document, load_scenario
from sim.model.scenario_set import ScenarioError
from sim.model.sizing import sizing_table
from sim.runs.api import run_scenario
from tests.conftest import ROOT, TINY, merge

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
REFERENCE = ROOT / "scenarios/llama70b-1k.yaml"
SIZES = [32, 64, 96, 128, 192, 256]


def stated_step_s(s) -> float:
    return perf.model_flops_per_gpu_step(s) / (
        s.cluster.gpu_spec.peak_tflops * 1e12 * s.performance.mfu
    )


# --------------------------------------------------------------------------- formulas


def test_pipeline_bubble_is_p_minus_1_over_v_times_m():
    assert perf.bubble_share(4, 1, 32) == 3 / 32
    assert perf.bubble_share(4, 2, 32) == 3 / 64  # interleaved: v model chunks per stage
    assert perf.bubble_share(16, 4, 16) == 15 / 64
    assert perf.bubble_share(8, 1, 34.5) == 7 / 34.5  # a shrunk replica's average share
    assert perf.bubble_share(1, 1, 8) == 0.0  # no pipeline
    assert perf.bubble_share(4, 1, None) == 0.0  # an abstract job without microbatches


def test_step_composes_compute_tensor_parallel_bubble_and_exposed_allreduce():
    parts = perf.StepParts(
        model_flops=6e12,
        compute_flops=6e12,
        peak_flops=2e12,
        tensor_parallel_s=0.5,
        bubble_share=0.25,
        data_parallel_s=1.0,
        overlap=0.75,
        collective="ring",
        microbatches=4,
        buckets=4,
    )
    b = perf.compose_step(parts, 0.5)
    # compute 6e12 / (2e12 * 0.5) = 6; the last of 4 microbatches' backward is 2/3 * 6/4 = 1;
    # 0.75 of it hides 0.75 s of the 1 s all-reduce (at most 3 of its 4 buckets)
    # (6 + 0.5) * 1.25 = 8.125; + 0.25 exposed = 8.375
    assert (b.compute_s, b.tensor_parallel_s, b.bubble_s) == (6.0, 0.5, 1.625)
    assert (b.data_parallel_s, b.exposed_data_parallel_s, b.step_s) == (1.0, 0.25, 8.375)
    assert b.mfu == 6e12 / (2e12 * 8.375)
    assert sum(b.shares().values()) == pytest.approx(1.0, rel=1e-12)
    # full recomputation executes the forward twice: more compute, the same model FLOPs
    redone = perf.compose_step(replace(parts, compute_flops=8e12), 0.5)
    assert redone.compute_s == 8.0 and redone.mfu == 6e12 / (2e12 * redone.step_s)


def test_the_exposed_reduction_follows_the_schedule_by_hand():
    """8 microbatches of 0.75 s (forward 0.25, backward 0.5), a 1 s reduction in 4 buckets,
    overlap 0.75; by ZeRO stage, and with pipeline sends."""
    parts = perf.StepParts(
        6e12, 6e12, 2e12, 0.5, 0.25, 1.0, 0.75, "ring", microbatches=8, buckets=4
    )
    # ZeRO 0: the all-reduce behind the last backward: 0.75 * 0.5 = 0.375 hidden
    plain = perf.compose_step(parts, 0.5)
    assert plain.exposed_data_parallel_s == pytest.approx(0.625, rel=1e-12)
    assert plain.step_s == pytest.approx(6.5 * 1.25 + 0.625, rel=1e-12)
    # ZeRO 1: a 0.5 s reduce-scatter behind the last backward (0.375 hidden, the most 3 of
    # 4 buckets allow) and a 0.5 s all-gather behind the next first forward (0.1875 hidden)
    sharded = perf.compose_step(replace(parts, zero_stage=1), 0.5)
    assert sharded.exposed_data_parallel_s == pytest.approx(0.125 + 0.3125, rel=1e-12)
    # ZeRO 3: every microbatch gathers all the parameters again: a 1/3 s gather behind its
    # 0.25 s forward (0.75 of it, 0.1875 s, hides: under the 3 of 4 layers' 0.25 s) and
    # 2/3 s (gather and reduce-scatter) behind its 0.5 s backward (0.375 s hides), inside
    # the pipeline (the bubble scales it)
    gathered = perf.compose_step(replace(parts, zero_stage=3, zero3_collectives=4), 0.5)
    exposed = 8 * (1 / 3 - 0.1875 + 2 / 3 - 0.375)
    assert gathered.exposed_data_parallel_s == pytest.approx(exposed, rel=1e-12)
    assert gathered.step_s == pytest.approx((6.5 + exposed) * 1.25, rel=1e-12)
    # each of the 4 collectives of a pass pays 2 ms of latency: a pass is 1/3 + 0.008 s,
    # hidden as before (the windows, not the layers, bound it)
    slow = perf.compose_step(
        replace(parts, zero_stage=3, zero3_collectives=4, zero3_latency_s=0.002), 0.5
    )
    assert slow.exposed_data_parallel_s == pytest.approx(
        8 * (3 * (1 / 3 + 0.008) - 0.1875 - 0.375), rel=1e-12
    )
    # gathered per tensor when each module runs (48 collectives a pass), with full
    # recomputation: forward, recomputed forward, backward gathers and the reduce-scatter,
    # none hidden
    demand = replace(
        parts,
        zero_stage=3,
        zero3_collectives=48,
        zero3_latency_s=0.002,
        zero3_prefetched=False,
        zero3_regather=True,
    )
    on_demand = perf.compose_step(demand, 0.5)
    assert on_demand.exposed_data_parallel_s == pytest.approx(8 * 4 * (1 / 3 + 0.096), rel=1e-12)
    assert on_demand.step_s == pytest.approx((6.5 + 8 * 4 * (1 / 3 + 0.096)) * 1.25, rel=1e-12)
    # fewer microbatches per replica: the same reduction beside a longer last backward
    fewer = perf.compose_step(replace(parts, microbatches=2), 0.5)
    assert fewer.exposed_data_parallel_s == pytest.approx(0.25, rel=1e-12)
    # pipeline sends: 16 of 10 ms on the critical path, hidden by the interleaved schedule
    # at the overlap's share
    sends = replace(parts, pipeline_sends=16, pipeline_send_s=0.01)
    assert perf.compose_step(sends, 0.5).step_s == pytest.approx(
        (6.5 + 0.16) * 1.25 + 0.625, rel=1e-12
    )
    interleaved = perf.compose_step(replace(sends, sends_overlap=True), 0.5)
    assert interleaved.pipeline_send_s == pytest.approx(0.04, rel=1e-12)


def test_calibration_inverts_the_schedule_exactly():
    parts = perf.StepParts(
        6e12, 6e12, 2e12, 0.5, 0.25, 1.0, 0.75, "ring", microbatches=8, buckets=4
    )
    for stage in (0, 1, 3):
        staged = replace(parts, zero_stage=stage, zero3_collectives=4)
        step = perf.compose_step(staged, 0.42).step_s
        compute = perf._compute_s_of(staged, step)
        assert 6e12 / (2e12 * compute) == pytest.approx(0.42, rel=1e-10)


def tiny_with_sequences(**changes) -> dict:
    """The tiny scenario as a job with sequences: 1,000 tokens of 10 = 100 sequences per step,
    pipeline 2 on 2 nodes of 2 GPUs: 2 data-parallel replicas of 50 microbatches."""
    doc = merge(
        TINY,
        {
            "model": {"seq_len": 10, "layers": 4, "hidden": 256, "flops_per_token": 6.0e9},
            "parallelism": {"pipeline": 2},
            "performance": {"mfu": 0.25},
        },
    )
    return merge(doc, changes)


def test_microbatches_bubble_and_allreduce_of_a_tiny_job_by_hand():
    s = load_document(tiny_with_sequences(), "tiny").base
    assert batch.sequences_per_step(s) == 100.0
    assert batch.microbatches(s) == 50.0
    assert batch.microbatches(s, replicas=1) == 100.0
    parts = perf.step_parts(s)
    assert parts.bubble_share == 1 / 50
    assert parts.tensor_parallel_s == 0.0
    # the DP group: ranks 0 and 2, one per node; 2 bytes per parameter of the half it holds
    ring = network.collective(
        "all_reduce", 1e9, network.Group(2, 1), s.network, s.cluster.gpu_spec, 2, "ring"
    )
    assert parts.data_parallel_s == pytest.approx(ring.seconds, rel=1e-12)
    cal = perf.calibration(s)
    assert cal is not None and cal.at_reference
    step = 6e9 * 1000 / 4 / (2e12 * 0.25)  # 3 s
    # the all-reduce (ZeRO 1: a reduce-scatter and an all-gather, half of it each) beside
    # the last microbatch's backward and the first one's forward: the 1 GB of gradients
    # go in 13 buckets of 80 MB, far more time than the transfer, so 1/13 of each stays
    assert parts.buckets == 13
    exposed = ring.seconds / 13
    assert perf.step_breakdown(s).exposed_data_parallel_s == pytest.approx(exposed, rel=1e-9)
    # 2 sends (activations forward, gradients back) per microbatch of 10 tokens x 256 bf16
    # values between the stages, the two GPUs of one node: over NVLink
    send = network.NVLINK_HOP_LATENCY_S + 10 * 256 * 2 / (
        network.nvlink_GB_s(s.cluster.gpu_spec, s.network) * 1e9
    )
    assert parts.pipeline_sends * parts.pipeline_send_s == pytest.approx(100 * send, rel=1e-12)
    # the optimizer updates the GPU's shard, 1e9 / 2 stages / 2 replicas parameters, moving
    # 30 bytes each at 3.35 TB/s; the step waits for the slowest of 4 GPUs whose compute
    # spreads by 2%: E[max of 4 standard normals] by Blom, Φ⁻¹(3.625 / 4.25)
    optimizer = 1e9 / 4 * 30 / 3.35e12
    assert parts.optimizer_s == pytest.approx(optimizer, rel=1e-12)
    slowest = 0.02 * NormalDist().inv_cdf(3.625 / 4.25)
    assert parts.slowest_factor == pytest.approx(slowest, rel=1e-9)
    compute = ((step - exposed - optimizer) / (1 + 1 / 50) - 100 * send) / (1 + slowest)
    assert cal.compute_efficiency == pytest.approx(6e9 * 1000 / 4 / 2e12 / compute, rel=1e-9)


# --------------------------------------------------------------------------- calibration


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_the_calibrated_point_gives_the_files_mfu_exactly(path):
    loaded = load_scenario(path)
    for point in loaded.points:
        s = point.scenario
        if s.performance.mfu is None:
            assert perf.model_scaling(s) == "compute_efficiency"
            continue
        assert perf.model_scaling(s) == "model"
        assert perf.step_time_s(s) == stated_step_s(s)
        assert perf.mfu(s) == s.performance.mfu
        cal = perf.calibration(s)
        assert cal.at_reference and cal.mfu_at == {} and 0 < cal.compute_efficiency <= 1
        # the built-up model at the calibrated efficiency is the same step to float precision
        built = perf.compose_step(perf.step_parts(s), cal.compute_efficiency)
        assert built.step_s == pytest.approx(stated_step_s(s), rel=1e-12)
        breakdown = perf.step_breakdown(s)
        assert breakdown.step_s == stated_step_s(s) and breakdown.mfu == s.performance.mfu
        parts = (
            breakdown.compute_s
            + breakdown.tensor_parallel_s
            + breakdown.bubble_s
            + breakdown.exposed_data_parallel_s
            + breakdown.pipeline_send_s
            + breakdown.context_parallel_s
            + breakdown.slowest_gpu_s
            + breakdown.optimizer_s
        )
        assert parts == pytest.approx(breakdown.step_s, rel=1e-12)


def test_llama70b_mfu_falls_with_the_cluster_size():
    rows = {r.nodes: r for r in sizing_table(REFERENCE, SIZES)}
    # 1,024 sequences do not split over 24 or 48 data-parallel replicas
    for n in (96, 192):
        assert rows[n].mfu is None
        assert rows[n].infeasible.startswith("model.global_batch_tokens: the batch of 1,024")
    feasible = [rows[n] for n in SIZES if rows[n].infeasible is None]
    assert [r.nodes for r in feasible] == [32, 64, 128, 256]
    assert [r.microbatches for r in feasible] == [128.0, 64.0, 32.0, 16.0]
    mfus = [r.mfu for r in feasible]
    assert all(a > b for a, b in zip(mfus, mfus[1:])), mfus
    assert rows[128].mfu == 0.45 and rows[128].speedup_vs_linear == 1.0
    # time to train is not proportional to 1/nodes: node-days grow with the size
    node_days = [r.ideal_days * r.nodes for r in feasible]
    assert all(a < b for a, b in zip(node_days, node_days[1:])), node_days
    assert rows[256].speedup_vs_linear < 1 < rows[32].speedup_vs_linear
    # the step is the same model at every size: 256 nodes is the calibrated model, not 0.45
    s = load_scenario(REFERENCE, ["cluster.nodes=256"]).base
    cal = perf.calibration(s)
    assert not cal.at_reference and cal.mfu_at == {"cluster.nodes": 128}
    built = perf.compose_step(perf.step_parts(s), cal.compute_efficiency)
    assert perf.step_time_s(s) == built.step_s == rows[256].step_s


def test_fixed_scaling_keeps_todays_numbers():
    at_128 = load_scenario(REFERENCE, ["performance.mfu_scaling=fixed"]).base
    for nodes in (64, 256):
        s = load_scenario(
            REFERENCE, ["performance.mfu_scaling=fixed", f"cluster.nodes={nodes}"]
        ).base
        assert perf.model_scaling(s) == "fixed" and perf.calibration(s) is None
        assert perf.mfu(s) == 0.45
        assert perf.step_time_s(s) == stated_step_s(s)
        assert perf.step_time_s(s) == pytest.approx(
            perf.step_time_s(at_128) * 128 / nodes, rel=1e-12
        )
        assert build_plan(s).step_s_by_replicas == ()


def test_an_abstract_job_keeps_a_fixed_mfu():
    """No model.seq_len: no sequences to split, the MFU stays what the file says."""
    one = load_document(TINY, "tiny").base
    two = load_document(TINY, "tiny", ["cluster.nodes=4"]).base
    assert perf.model_scaling(two) == "abstract" and perf.calibration(two) is None
    assert perf.step_time_s(one) == 1.0 and perf.step_time_s(two) == 0.5
    assert perf.mfu(two) == 0.75
    assert perf.configuration_problem(two) is None


def test_mfu_at_round_trips_through_a_runs_resolved_scenario(tmp_path):
    outcome = run_scenario(
        REFERENCE,
        overrides=["cluster.nodes=256"],
        replicas=2,
        workers=1,
        out=tmp_path,
        progress=False,
        figures=None,
    )
    written = outcome.run_dir / "scenario.yaml"
    resolved = parse_yaml(written.read_text())
    assert resolved["cluster"]["nodes"] == 256
    assert resolved["performance"]["mfu_at"] == {"cluster.nodes": 128}
    again = load_scenario(written).base
    assert perf.step_time_s(again) == perf.step_time_s(outcome.scenario_set.base)
    assert perf.mfu(again) == perf.mfu(outcome.scenario_set.base) < 0.45
    # keys the step does not depend on are not recorded
    spares = load_scenario(REFERENCE, ["cluster.spare_nodes=2", "model.tokens=1e12"])
    assert "mfu_at" not in spares.resolved["performance"]
    # loading the resolved file with its own nodes set again changes nothing
    assert dump_resolved(load_scenario(written, ["cluster.nodes=256"])) == dump_resolved(
        load_scenario(written)
    )


def test_mfu_at_given_by_the_user_is_kept():
    """Measured on 64 nodes ("our 0.45 was ..."): the 128-node file runs below it, 64 at it."""
    doc = parse_yaml(REFERENCE.read_text())
    doc["performance"]["mfu_at"] = {"cluster.nodes": 64}
    at_128 = load_document(doc, "measured-at-64").base
    assert perf.mfu(at_128) < 0.45
    assert not perf.calibration(at_128).at_reference
    moved = load_document(doc, "measured-at-64", ["cluster.nodes=64"])
    assert moved.resolved["performance"]["mfu_at"] == {"cluster.nodes": 64}  # theirs stays
    assert perf.mfu(moved.base) == 0.45 and perf.calibration(moved.base).at_reference
    assert perf.step_time_s(moved.base) == stated_step_s(moved.base)


def test_a_sweep_calibrates_at_the_files_own_configuration():
    doc = parse_yaml(REFERENCE.read_text())
    doc["sweep"] = {"cluster.nodes": [64, 128, 256]}
    loaded = load_document(doc, "swept")
    assert "mfu_at" not in loaded.resolved["performance"]  # the sweep is kept, not baked in
    mfus = [perf.mfu(p.scenario) for p in loaded.points]
    assert mfus[1] == 0.45 and mfus[0] > 0.45 > mfus[2]
    assert [p.scenario.performance.mfu_at for p in loaded.points] == [
        {"cluster.nodes": 128},
        {},
        {"cluster.nodes": 128},
    ]


@pytest.mark.parametrize(
    ("mfu_at", "path"),
    [
        ({"cluster.nodez": 64}, "performance.mfu_at.cluster.nodez"),
        ({"checkpoint.interval_steps": 10}, "performance.mfu_at.checkpoint.interval_steps"),
        ({"cluster.nodes": "many"}, "performance.mfu_at"),
        ({"cluster.nodes": 96}, "performance.mfu_at"),  # a batch that does not split there
    ],
)
def test_mfu_at_names_configuration_keys_of_the_schema(mfu_at, path):
    doc = parse_yaml(REFERENCE.read_text())
    doc["performance"]["mfu_at"] = mfu_at
    with pytest.raises(ScenarioError) as err:
        load_document(doc, "bad")
    assert err.value.path == path


def test_an_mfu_no_efficiency_reaches_is_refused():
    with pytest.raises(ScenarioError) as err:
        load_scenario(REFERENCE, ["performance.mfu=0.95"])
    assert err.value.path == "performance.mfu"
    assert "mfu 0.95" in err.value.message and "compute efficiency of 2.928" in err.value.message


def test_an_efficiency_just_above_1_is_named_with_its_digits():
    """An MFU that needs 1.0018 says 1.0018, not 'would need 1 (at most 1)'."""
    s = load_scenario(REFERENCE).base
    mfu = perf.compose_step(perf.step_parts(s), 1.0018).mfu
    with pytest.raises(ScenarioError) as err:
        load_scenario(REFERENCE, [f"performance.mfu={mfu!r}"])
    assert "compute efficiency of 1.0018 (at most 1)" in err.value.message


# --------------------------------------------------------------------------- elastic shrink


def test_elastic_shrink_step_times_follow_the_model():
    s = load_scenario(REFERENCE, ["recovery.policy=elastic"]).base
    plan = build_plan(s)
    cal = perf.calibration(s)
    assert plan.elastic_min_replicas == 24 and plan.full_replicas == 32
    table = plan.step_s_by_replicas
    assert len(table) == 9 and table[-1] == plan.step_s == stated_step_s(s)
    for replicas in range(24, 32):
        parts = perf.step_parts(s, replicas)
        # 1,024 sequences over 30 replicas: 34.13 microbatches on average, in the bubble
        assert parts.bubble_share == 3 / (1024 / replicas)
        assert parts.model_flops == pytest.approx(perf.model_flops_per_gpu_step(s) * 32 / replicas)
        step = perf.compose_step(parts, cal.compute_efficiency).step_s
        assert plan.step_s_with(replicas) == table[replicas - 24] == step
        # a smaller bubble share: less than the proportional 32/replicas of the full step
        assert step < plan.step_s * 32 / replicas
    assert all(a > b for a, b in zip(table, table[1:]))
    # a fixed MFU keeps the proportional rule
    fixed = build_plan(
        load_scenario(REFERENCE, ["recovery.policy=elastic", "performance.mfu_scaling=fixed"]).base
    )
    assert fixed.step_s_with(24) == fixed.step_s * 32 / 24


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_the_shrunk_allreduce_equals_the_flow_model_on_the_shipped_trees(path):
    """Below the full size the step table uses the α–β all-reduce: it must be what the flow
    model gives on the nodes the shrunk job keeps (the shipped trees are non-blocking)."""
    s = load_scenario(path).base
    plan = build_plan(s.model_copy(update={"recovery": s.recovery.model_copy(
        update={"policy": "elastic"})}))  # fmt: skip
    full = plan.full_replicas
    per_node = max(1, plan.gpus_per_node // plan.gpus_per_replica)
    shrunk = [d for d in range(plan.elastic_min_replicas, full) if d % per_node == 0][:2]
    assert shrunk
    for replicas in shrunk:
        nodes = replicas * plan.gpus_per_replica // plan.gpus_per_node
        on_fewer = s.model_copy(update={"cluster": s.cluster.model_copy(update={"nodes": nodes})})
        assert perf.gradient_allreduce_at_s(s, replicas) == pytest.approx(
            perf.gradient_allreduce_s(on_fewer), rel=1e-9
        )


# --------------------------------------------------------------------------- memory


def test_memory_of_a_small_job_by_hand():
    doc = tiny_with_sequences(
        model={"params": 8.0e9, "seq_len": 1024, "layers": 32, "hidden": 4096},
        cluster={"nodes": 2, "gpus_per_node": 4},
        network={"nics_per_node": 4},
        parallelism={"tensor": 2, "pipeline": 2},
    )
    doc["model"]["global_batch_tokens"] = 1024 * 64  # 64 sequences: 2 replicas x 32
    s = load_document(doc, "mem").base
    use = memory.memory_use(s)
    per_gpu = 8e9 / 4
    # bf16 weights and gradients (the defaults), ZeRO-1 over 2 data-parallel ranks: fp32
    # main weights and gradients and two fp32 moments, 16 bytes (Megatron's 4 + 16/d)
    assert (use.weights_GB, use.gradients_GB) == (per_gpu * 2 / 1e9, per_gpu * 2 / 1e9)
    assert use.optimizer_GB == per_gpu * 16 / 2 / 1e9
    assert use.bytes_per_param == 4 + 16 / 2
    # selective: 34·s·b·h/t per layer; 1F1B: 2 microbatches of 16 layers on the first stage
    assert use.in_flight == 2
    assert use.activations_GB == pytest.approx(34 * 1024 * 4096 / 2 * 32 / 1e9, rel=1e-12)
    # without recomputation: FlashAttention-style attention stores no scores (the default),
    # the old formula keeps Korthikanti's 5·a·s/h term
    none = load_document(merge(doc, {"parallelism": {"recompute": "none"}}), "mem").base
    assert memory.memory_use(none).activations_GB == use.activations_GB
    stored = merge(doc, {"parallelism": {"recompute": "none"}})
    stored["memory"] = {"attention": "stored-scores"}
    heads = 4096 / 128
    assert memory.memory_use(load_document(stored, "mem").base).activations_GB == pytest.approx(
        1024 * 4096 / 2 * (34 + 5 * heads * 1024 / 4096) * 32 / 1e9, rel=1e-12
    )
    full = load_document(merge(doc, {"parallelism": {"recompute": "full"}}), "mem").base
    assert memory.memory_use(full).activations_GB == pytest.approx(
        (2 * 1024 * 4096 / 2 * 32 + 34 * 1024 * 4096 / 2) / 1e9, rel=1e-12
    )
    interleaved = load_document(merge(doc, {"parallelism": {"virtual_stages": 2}}), "mem").base
    assert memory.memory_use(interleaved).activations_GB == pytest.approx(
        use.activations_GB * (1 + 1 / 4), rel=1e-12
    )
    zero3 = load_document(merge(doc, {"parallelism": {"zero_stage": 3}}), "mem").base
    z3 = memory.memory_use(zero3)
    assert z3.weights_GB == per_gpu * 2 / 2 / 1e9
    assert network.gradient_bytes_per_rank(zero3) == 1.5 * network.gradient_bytes_per_rank(s)
    # the layer computed and the one prefetched (bf16) and one layer's bf16 gradients, of
    # the 16 layers a GPU of the stage holds a tensor share of
    assert z3.zero3_buffers_GB == pytest.approx(per_gpu / 16 * (2 + 2 + 2) / 1e9, rel=1e-12)
    # context parallelism over 2: each GPU keeps half of each sequence's activations; the
    # optimizer is sharded over data x context ranks (Megatron's distributed optimizer)
    split = load_document(merge(doc, {"parallelism": {"tensor": 1, "context": 2}}), "mem").base
    assert batch.data_parallel_size(split) == 2 and memory.sharding_ranks(split) == 4
    assert memory.memory_use(split).activations_GB == pytest.approx(
        34 * 512 * 4096 * 32 / 1e9, rel=1e-12
    )
    assert memory.memory_use(split).optimizer_GB == 8e9 / 2 * 16 / 4 / 1e9


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_shipped_scenario_can_run(path):
    for point in load_scenario(path).points:
        assert point.infeasible is None
        assert perf.configuration_problem(point.scenario) is None
        use = memory.memory_use(point.scenario)
        assert 0 < use.total_GB <= use.capacity_GB


def test_microbatches_that_follow_from_the_batch_agree_with_the_old_explicit_ones():
    """The shipped files stated their microbatches before they followed from the batch: the
    bubble v·m they have now is the one they stated (their calibrated numbers are unchanged)."""
    stated = {"llama70b-1k": 32, "llama405b-8k": 64, "llama3-405b-16k": 64, "dense1t-16k": 128}
    for name, m in stated.items():
        s = load_scenario(ROOT / f"scenarios/{name}.yaml").base
        para = s.parallelism
        assert para.virtual_stages * batch.microbatches(s) == m
        assert perf.step_parts(s).bubble_share == (para.pipeline - 1) / m


# --------------------------------------------------------------------------- what is judged


def test_the_reference_is_judged_only_by_what_its_step_needs():
    # host RAM of 10 GB holds an in-memory checkpoint and a peer's copy at 256 nodes
    # (2 x 3.8 GB), not at the file's 128 (2 x 7.7 GB): the reference at 128 nodes is where
    # mfu was measured, its checkpoints are not the run's
    sets = ["cluster.nodes=256", "cluster.host_memory_GB=10", "checkpoint.memory_every_steps=100"]
    s = load_scenario(REFERENCE, sets).base
    assert s.performance.mfu_at == {"cluster.nodes": 128}
    own = perf.calibration(load_scenario(REFERENCE).base)
    assert perf.calibration(s).compute_efficiency == own.compute_efficiency
    assert perf.mfu(s) == perf.mfu(load_scenario(REFERENCE, ["cluster.nodes=256"]).base) < 0.45
    # without the step model nothing is measured anywhere: no reference is built or judged
    # (96 nodes do not split the batch; 0 nodes is no configuration at all)
    fixed = ["performance.mfu_scaling=fixed", "performance.mfu_at={cluster.nodes: 96}"]
    assert perf.mfu(load_scenario(REFERENCE, fixed).base) == 0.45
    abstract = merge(TINY, {"performance": {"mfu_at": {"cluster.nodes": 0}}})
    assert perf.model_scaling(load_document(abstract, "tiny").base) == "abstract"
    with pytest.raises(ScenarioError) as err:
        load_scenario(REFERENCE, ["performance.mfu_at={cluster.nodes: 96}"])
    assert err.value.path == "performance.mfu_at"


def test_a_point_whose_mfu_no_efficiency_reaches_is_infeasible_not_the_sweep():
    loaded = load_scenario(REFERENCE, params=["performance.mfu=0.45,0.95"])
    reachable, too_high = loaded.points
    assert reachable.infeasible is None and perf.mfu(reachable.scenario) == 0.45
    assert too_high.infeasible.startswith(
        "performance.mfu: mfu 0.95 at the scenario's own configuration means a step of 1.971 s"
    )
    assert "compute efficiency of 2.928" in too_high.infeasible
    # the file's own mfu (here by --set) that no efficiency reaches is the file's problem,
    # whatever else the sweep varies: refused, blaming the file, not a sweep point
    with pytest.raises(ScenarioError) as err:
        load_scenario(REFERENCE, ["performance.mfu=0.95"], ["cluster.nodes=64,128"])
    assert err.value.path == "performance.mfu"
    assert err.value.message.startswith("mfu 0.95 at cluster.nodes=128 means")
    assert "(at sweep point" not in err.value.message
    assert err.value.message.endswith("(the file's own: every sweep point is calibrated there)")
    # ... and a sweep of mfu none of whose values is reached is refused for its first point
    with pytest.raises(ScenarioError) as err:
        load_scenario(REFERENCE, params=["performance.mfu=0.95,0.96"])
    assert err.value.path == "performance.mfu"
    assert "(at sweep point {'performance.mfu': 0.95}); none of the 2" in err.value.message


def test_an_abstract_jobs_model_states_must_fit_in_the_gpu():
    # TINY: 1B parameters on 4 GPUs: weights 2 + gradients 2 + optimizer 16 / 4 = 8 GB of 80
    use = memory.memory_use(load_document(TINY, "tiny").base)
    assert use.total_GB == pytest.approx(8.0) and use.activations_GB == 0
    big = merge(TINY, {"model": {"params": 1.2e11}})  # 960 GB per GPU: no seq_len needed
    with pytest.raises(ScenarioError) as err:
        load_document(big, "tiny")
    assert err.value.path == "parallelism"
    assert "need 960.0 GB per GPU, more than the test's 80 GB" in err.value.message
    assert "weights 240.0 + gradients 240.0 + optimizer 480.0" in err.value.message
    assert "no activations counted (they need model.seq_len, layers and hidden)" in (
        err.value.message
    )
    swept = load_document(merge(TINY, {"sweep": {"model.params": [1e9, 1.2e11]}}), "tiny")
    assert swept.points[0].infeasible is None
    assert swept.points[1].infeasible.startswith("parallelism: model states and activations")


TENSOR_SPANS = "parallelism.tensor: tensor = 4 spans nodes"


def test_tensor_parallelism_wider_than_a_node_cannot_run_in_either_mode():
    # 2 nodes of 2 GPUs: tensor 4 divides the 4 GPUs but spans both nodes
    mfu = tiny_with_sequences(parallelism={"pipeline": 1, "tensor": 2})
    efficiency = merge(mfu, {"performance": {"mfu": None, "compute_efficiency": 0.5}})
    for doc in (mfu, efficiency):
        with pytest.raises(ScenarioError) as err:
            load_document(merge(doc, {"parallelism": {"tensor": 4}}), "tiny")
        assert err.value.path == "parallelism.tensor"
        assert err.value.message.startswith("tensor = 4 spans nodes")
        assert "cluster.gpus_per_node = 2 GPUs; use tensor <= 2" in err.value.message
        # in a sweep, the point that spans nodes is marked, the others run
        swept = load_document(merge(doc, {"sweep": {"parallelism.tensor": [2, 4]}}), "tiny")
        assert swept.points[0].infeasible is None
        assert swept.points[1].infeasible.startswith(TENSOR_SPANS)
