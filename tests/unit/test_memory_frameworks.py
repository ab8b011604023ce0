"""GPU memory as frameworks keep it, by hand: the model states' bytes per parameter of
Megatron-LM's distributed-optimizer table for each precision, the activations in flight as
Megatron's schedules hold them, the estimate's uncertainty (run and warn near the limit),
and the vendor-measured configurations that ran (scenarios/published, their sources in the
files' comments)."""

from __future__ import annotations

import pytest

from sim.model import memory, perf
from sim.model.scenario import load_document, load_scenario
from sim.model.scenario_set import ScenarioError
from sim.model.schema import MemoryConfig
from tests.conftest import ROOT, TINY, merge

PUBLISHED = ROOT / "scenarios" / "published"


@pytest.mark.parametrize(
    ("param", "grad", "replicated", "distributed_at_8"),
    [
        # Megatron-LM docs (distrib_optimizer): non-distributed, and 4 + 16/d, 6 + 12/d, 8 + 8/d
        ("bf16", "bf16", 20.0, 4 + 16 / 8),
        ("fp16", "fp16", 20.0, 4 + 16 / 8),
        ("bf16", "fp32", 18.0, 6 + 12 / 8),
        ("fp32", "fp32", 16.0, 8 + 8 / 8),
    ],
)
def test_bytes_per_parameter_are_megatrons_table(param, grad, replicated, distributed_at_8):
    states = memory.state_bytes(MemoryConfig(param_precision=param, grad_precision=grad))
    assert states.per_param(8, zero_stage=0) == replicated
    assert states.per_param(8, zero_stage=1) == distributed_at_8
    # ZeRO 2 shards the gradients too, ZeRO 3 the weights as well
    assert states.per_param(8, zero_stage=3) == replicated / 8


def test_the_defaults_are_megatron_cores_and_the_byte_keys_still_override():
    defaults = memory.state_bytes(MemoryConfig())
    assert (defaults.weights, defaults.gradients, defaults.optimizer) == (2.0, 2.0, 16.0)
    # 16-bit Adam moments (the precision-aware optimizer): 4 + 4 + 2 + 2 sharded
    assert memory.state_bytes(MemoryConfig(moment_precision="bf16")).optimizer == 12.0
    # the documented keys keep loading and mean what they said
    given = MemoryConfig(
        weight_bytes_per_param=2, grad_bytes_per_param=4, optimizer_bytes_per_param=12
    )
    assert memory.state_bytes(given).per_param(4, zero_stage=1) == 2 + 4 + 12 / 4


def test_in_flight_chunks_as_megatrons_schedules_hold_them():
    # 1F1B: min(p, m) microbatches; fewer microbatches than stages hold all of them
    assert memory.in_flight_chunks(8, 1, 32) == 8
    assert memory.in_flight_chunks(12, 1, 2) == 2
    # interleaved: warm-up 2·(p − 1) + (v − 1)·p chunks and one more, at most m·v; with
    # m ≥ p that is Megatron's (1 + (p − 1)/(p·v)) × p microbatches of v chunks
    chunks = memory.in_flight_chunks(9, 7, 63)
    assert chunks == 2 * 8 + 6 * 9 + 1 == 71
    assert chunks / 7 == pytest.approx(9 * (1 + 8 / 63), rel=1e-12)
    assert memory.in_flight_chunks(16, 2, 8) == 16  # all 8 x 2 chunks


def test_near_the_limit_it_runs_and_warns_naming_the_margin():
    """TINY's 1B parameters on 4 GPUs of 10 GB: 2 + 2 + 16/4 = 8 bytes per parameter, 8 GB:
    2 GB below, 1 GB of uncertainty (10%): no warning; on 8.5 GB GPUs 0.5 GB below: warned;
    on 7.5 GB 0.5 GB over: runs, warned; on 7 GB 1 GB over: at the edge; on 6.5 GB refused."""

    def on(memory_GB: float):
        return merge(
            TINY, {"cluster": {"gpu": {"name": "g", "peak_tflops": 2.0, "memory_GB": memory_GB}}}
        )

    assert perf.memory_warning(load_document(on(10.0), "t").base) is None
    under = perf.memory_warning(load_document(on(8.5), "t").base)
    assert "0.5 GB less than the g's 8.5 GB" in under and "uncertainty of 0.9 GB" in under
    over = perf.memory_warning(load_document(on(7.5), "t").base)
    assert "8.0 GB per GPU, is 0.5 GB more than the g's 7.5 GB" in over
    with pytest.raises(ScenarioError) as err:
        load_document(on(6.5), "t")
    assert err.value.path == "parallelism"
    assert "more than the g's 6.5 GB by 1.5 GB, beyond the estimate's uncertainty of 0.7 GB" in (
        err.value.message
    )


def test_llama31_405b_on_576_h100s_fits_as_nemo_ran_it():
    """dgxc-benchmarking's Llama 3.1 405B (TP 8, PP 9, CP 2, VP 7, 63 microbatches), by
    hand: 405e9 / 72 parameters per GPU at 4 + 16/8 bytes (bf16 parameters and gradients,
    the distributed optimizer over 4 data-parallel x 2 context ranks); activations
    28.25·s/c·h/t per layer (GQA's 8 of 128 heads' keys and values, no dropout), 71
    chunks of 2 layers in flight."""
    s = load_scenario(PUBLISHED / "llama31-405b-dgxc-weak.yaml").base
    use = memory.memory_use(s)
    states = 405e9 / 72 * (4 + 16 / 8)
    kept = 34 - 4 * (1 - 8 / 128) - 2
    activations = kept * 8192 / 2 * 16384 / 8 * 71 * 2
    assert use.total_GB == pytest.approx((states + activations) / 1e9, rel=1e-12)
    assert use.total_GB == pytest.approx(67.4, abs=0.05)
    assert perf.configuration_problem(s) is None and perf.memory_warning(s) is None
    # the old model (fp32 gradients, 6 + 12/d, and Korthikanti's 34 for every layer)
    # refused it by 2.7 GB
    old = states / (4 + 16 / 8) * (6 + 12 / 8) + 34 / kept * activations
    assert old / 1e9 == pytest.approx(82.7, abs=0.05)


def test_nemotron4_340b_on_128_h100s_runs_near_the_limit():
    """dgxc-benchmarking's Nemotron-4 340B (TP 8, PP 8, VP 12, 16 microbatches, 2 data-
    parallel ranks), by hand: 341e9 / 64 parameters per GPU at 2 + 2 + (4 + 4 + 2 + 2)/2
    bytes (bf16 moments: the scenario says why); activations 28.33·s·h/t per layer (8 of
    96 heads' keys and values, no dropout), 103 chunks of one layer in flight: 80.8 GB,
    0.8 GB over 80, within the 8 GB uncertainty: it runs, warned."""
    s = load_scenario(PUBLISHED / "nemotron4-340b-dgxc-weak.yaml").base
    use = memory.memory_use(s)
    states = 341e9 / 64 * (4 + 12 / 2)
    kept = 34 - 4 * (1 - 8 / 96) - 2
    activations = kept * 4096 * 18432 / 8 * (2 * 7 + 11 * 8 + 1)
    assert use.total_GB == pytest.approx((states + activations) / 1e9, rel=1e-12)
    assert perf.configuration_problem(s) is None
    warning = perf.memory_warning(s)
    assert warning is not None and "0.8 GB more than the H100-SXM's 80 GB" in warning
    # with fp32 moments (4 + 16/2 bytes) it is refused, naming the rule and the numbers
    with pytest.raises(ScenarioError) as err:
        load_scenario(PUBLISHED / "nemotron4-340b-dgxc-weak.yaml", ["memory.moment_precision=fp32"])
    assert "beyond the estimate's uncertainty of 8.0 GB" in err.value.message
    assert "12 bytes per parameter: bf16 parameters, bf16 gradients" in err.value.message
