"""The step's terms that grow (or shrink) with the data-parallel size, each against a
by-hand calculation: the slowest of N GPUs, the optimizer step on the GPU's shard, and the
distributed optimizer's reduce-scatter and all-gather chunk by chunk under the
interleaved schedule; and the step composed from them."""

from __future__ import annotations

from statistics import NormalDist

import pytest

from sim.model import network, perf
from sim.model.scenario import load_document
from tests.conftest import TINY, merge


@pytest.mark.parametrize("gpus", [2, 4, 96, 576, 4608])
def test_the_slowest_of_n_gpus_is_blom_s_order_statistic(gpus):
    assert perf.slowest_of(gpus) == pytest.approx(
        NormalDist().inv_cdf((gpus - 0.375) / (gpus + 0.25)), rel=1e-9
    )


def test_one_gpu_waits_for_no_one():
    assert perf.slowest_of(1) == 0.0


def test_the_optimizer_step_updates_the_gpus_shard_at_hbm_bandwidth():
    """TINY: 1B parameters on 2 data-parallel replicas of 2 stages; the distributed
    optimizer (ZeRO 1) updates 1e9 / 2 / 2 of them, 30 bytes each at the GPU's 3.35 TB/s;
    without it (ZeRO 0) every replica updates its whole stage."""
    doc = merge(TINY, {"parallelism": {"pipeline": 2}})
    s = load_document(doc, "t").base
    assert perf.optimizer_step_s(s) == pytest.approx(1e9 / 4 * 30 / 3.35e12, rel=1e-12)
    plain = load_document(merge(doc, {"parallelism": {"zero_stage": 0}}), "t").base
    assert perf.optimizer_step_s(plain) == pytest.approx(1e9 / 2 * 30 / 3.35e12, rel=1e-12)
    # an elastic shrink to one replica: the shard doubles
    assert perf.optimizer_step_s(s, replicas=1) == pytest.approx(2 * perf.optimizer_step_s(s))


def test_one_chunk_is_the_plain_overlap():
    for transfer, window in ((1.0, 0.8), (0.3, 2.0)):
        assert perf.chunked_reduce_scatter_s(transfer, window, 0.75, 10) == pytest.approx(
            perf.hidden_behind(transfer, window, 0.75, 10), rel=1e-12
        )
        assert perf.chunked_all_gather_s(transfer, window, 0.75, 10) == pytest.approx(
            perf.hidden_behind(transfer, window, 0.75, 10), rel=1e-12
        )


def test_the_reduce_scatter_of_two_chunks_by_hand():
    """1 s of reduce-scatter in 10 buckets, a last microbatch's backward of 0.8 s, p = 4,
    full overlap. One chunk: 0.8 s hides, 0.2 s shows. Two chunks: chunk 1's half is
    ready 4 x 0.4 s before the end and done by then; chunk 0's half starts 0.4 s before
    the end, and its last of 5 buckets (0.1 s) shows."""
    assert perf.chunked_reduce_scatter_s(1.0, 0.8, 1.0, 10) == pytest.approx(0.2)
    assert perf.chunked_reduce_scatter_s(1.0, 0.8, 1.0, 10, 4, 2) == pytest.approx(0.1)
    # a long reduction spills: 4 s in 2 chunks, 2 s each; chunk 1 runs from 2.0 s before
    # the end (1.6 + 0.4) to the end, chunk 0 then takes its 2 s after it
    assert perf.chunked_reduce_scatter_s(4.0, 0.8, 1.0, 10, 4, 2) == pytest.approx(2.0)
    # the cool-down's idle time (the bubble, 1 s) helps: chunk 1 is ready 1.6 + 1.0/2 s
    # before the end, done 0.5 s before it; chunk 0 starts with its backward, 0.4 s before
    assert perf.chunked_reduce_scatter_s(4.0, 0.8, 1.0, 10, 4, 2, 1.0) == pytest.approx(1.6)


def test_the_all_gather_of_two_chunks_by_hand():
    """1 s of all-gather in 10 buckets before a first forward of 0.4 s, p = 4. One chunk:
    0.4 s hides, 0.6 s shows. Two chunks of 0.5 s: chunk 0 is needed after its first
    forward of 0.2 s (0.3 s waited); chunk 1, after 4 chunk-forwards (0.8 s) and its own
    (0.2 s), is done at 1.0 s: nothing more."""
    assert perf.chunked_all_gather_s(1.0, 0.4, 1.0, 10) == pytest.approx(0.6)
    assert perf.chunked_all_gather_s(1.0, 0.4, 1.0, 10, 4, 2) == pytest.approx(0.3)


def test_the_step_composes_the_new_terms_by_hand():
    """compute 6 s, the slowest GPU 5% more, tensor-parallel 0.5 s, bubble 0.25 of the busy
    time, an optimizer step of 0.1 s; the distributed optimizer's 1 s reduction in one
    chunk, half beside the last microbatch's 1 s backward and half beside the first one's
    0.5 s forward (overlap 0.75, 4 buckets): 0.5 − min(0.75, 0.375) and
    0.5 − min(0.375, 0.375) exposed."""
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
        zero_stage=1,
        slowest_factor=0.05,
        optimizer_s=0.1,
    )
    b = perf.compose_step(parts, 0.5)
    assert b.compute_s == 6.0 and b.slowest_gpu_s == pytest.approx(0.3)
    busy = 6.0 + 0.3 + 0.5
    # per microbatch 1.5 s: forward 0.5, backward 1.0; each half of the reduction 0.5 s
    exposed = perf.hidden_behind(0.5, 1.0, 0.75, 4) + perf.hidden_behind(0.5, 0.5, 0.75, 4)
    assert exposed == pytest.approx(0.125 + 0.125)
    assert b.exposed_data_parallel_s == pytest.approx(exposed)
    assert b.step_s == pytest.approx(busy * 1.25 + exposed + 0.1, rel=1e-12)
    shares = b.shares()
    assert shares["slowest GPU"] == pytest.approx(0.3 / b.step_s)
    assert shares["optimizer step"] == pytest.approx(0.1 / b.step_s)
    assert b.bubble_s == pytest.approx(0.25 * busy)
    assert sum(shares.values()) == pytest.approx(1.0, rel=1e-12)


def test_the_slowest_gpu_grows_with_the_job_at_a_fixed_batch_per_gpu():
    """The same replica on 2 and 8 nodes: the slowest of 4 GPUs, then of 16."""
    small = load_document(TINY, "t").base
    large = load_document(
        merge(TINY, {"cluster": {"nodes": 8}, "model": {"global_batch_tokens": 4000}}), "t"
    ).base
    ratio = perf.step_parts(large).slowest_factor / perf.step_parts(small).slowest_factor
    assert ratio == pytest.approx(perf.slowest_of(16) / perf.slowest_of(4), rel=1e-12)


def test_the_gradient_precision_sets_the_reduction_and_the_parameters_the_gather():
    """fp32 gradients (Megatron-LM's --bf16 default) reduce 4 bytes per parameter: twice
    the bf16 gradients' traffic; the distributed optimizer's all-gather still moves the
    bf16 parameters, half the reduce-scatter's bytes."""
    doc = merge(TINY, {"parallelism": {"pipeline": 2}})
    bf16 = load_document(doc, "t").base
    fp32 = load_document(merge(doc, {"memory": {"grad_precision": "fp32"}}), "t").base
    assert network.gradient_bytes_per_rank(bf16) == 2 * 1e9 / 2
    assert network.gradient_bytes_per_rank(fp32) == 4 * 1e9 / 2
    assert perf.step_parts(bf16).gather_ratio == 1.0
    assert perf.step_parts(fp32).gather_ratio == 0.5
    assert perf.step_parts(fp32).data_parallel_s > perf.step_parts(bf16).data_parallel_s
