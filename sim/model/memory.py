"""GPU memory as modern stacks use it: model states sharded by tensor × pipeline and
by the ZeRO stage over the data-parallel ranks, the activations the first pipeline
stage holds (FlashAttention-style by default, Korthikanti et al. 2022), and ZeRO-3's
gathered buffers. Whether it fits is `sim.model.perf.configuration_problem`'s call."""

from __future__ import annotations

from dataclasses import dataclass

from sim.model.batch import data_parallel_size, microbatches
from sim.model.schema import Scenario


@dataclass(frozen=True)
class MemoryUse:
    """GPU memory one GPU of the first pipeline stage needs (GB = 1e9 bytes)."""

    weights_GB: float
    gradients_GB: float
    optimizer_GB: float
    activations_GB: float  # 0 without the model's shape (layers, hidden)
    in_flight: float  # microbatches whose activations the first stage holds (1F1B)
    capacity_GB: float
    interleave: float = 1.0  # × (1 + (p − 1)/(p·v)) with the interleaved schedule
    zero3_buffers_GB: float = 0.0  # ZeRO-3: gathered parameters and unreduced gradients

    @property
    def total_GB(self) -> float:
        return (
            self.weights_GB
            + self.gradients_GB
            + self.optimizer_GB
            + self.activations_GB
            + self.zero3_buffers_GB
        )


# Korthikanti et al. 2022 (§4.1): a transformer layer keeps 34·s·b·h bytes of activations
# (with tensor and sequence parallelism: over t) besides the attention scores' 5·a·s²·b
KEPT_BYTES_PER_TOKEN_HIDDEN = 34.0


SCORES_BYTES = 5.0


def activation_bytes_per_layer(scenario: Scenario) -> float:
    """Activations one layer keeps for one microbatch on one GPU (Korthikanti et al. 2022,
    with tensor and sequence parallelism over t GPUs, and context parallelism splitting
    the sequence over c): s/c·b·h/t · 34 with FlashAttention-style attention (the scores
    are never stored: `memory.attention: flash`, the default) or selective recomputation
    (the attention core is recomputed); s/c·b·h/t · (34 + 5·a·s/h) with the scores stored
    and no recomputation (`memory.attention: stored-scores`); and only the layer's input,
    2·s/c·b·h/t, with full recomputation."""
    model, para = scenario.model, scenario.parallelism
    assert model.seq_len and model.hidden
    s, b, h, t = model.seq_len, para.micro_batch_size, model.hidden, para.tensor
    base = s / para.context * b * h / t
    if para.recompute == "full":
        return 2.0 * base
    if para.recompute == "selective" or scenario.memory.attention == "flash":
        return KEPT_BYTES_PER_TOKEN_HIDDEN * base
    heads = model.heads or h / 128
    return base * (KEPT_BYTES_PER_TOKEN_HIDDEN + SCORES_BYTES * heads * s / h)


def sharding_ranks(scenario: Scenario) -> int:
    """The ranks ZeRO shards a model state over: the data-parallel replicas, and with
    context parallelism their context ranks (they hold the same parameters)."""
    return data_parallel_size(scenario) * scenario.parallelism.context


def memory_use(scenario: Scenario) -> MemoryUse:
    """Model states sharded by tensor × pipeline (and by the data-parallel × context ranks
    as the ZeRO stage says: 1 optimizer states, 2 and gradients, 3 and weights;
    Rajbhandari et al. 2020), plus the activations of the first pipeline stage: with 1F1B
    it holds min(pipeline, microbatches) microbatches of layers/pipeline layers each, an
    interleaved schedule (1 + (p − 1)/(p·v)) times that (Korthikanti et al. 2022,
    §4.2.3); full recomputation also holds one layer's activations while it is
    recomputed. ZeRO-3 adds the buffers of the layer it computes and the one it
    prefetches (their gathered bf16 parameters) and one layer's gradients before their
    reduce-scatter."""
    model, para, mem = scenario.model, scenario.parallelism, scenario.memory
    ranks = sharding_ranks(scenario)
    per_gpu = model.params / (para.tensor * para.pipeline)
    zero = para.zero_stage
    weights = per_gpu * mem.weight_bytes_per_param / (ranks if zero >= 3 else 1)
    gradients = per_gpu * mem.grad_bytes_per_param / (ranks if zero >= 2 else 1)
    optimizer = per_gpu * mem.optimizer_bytes_per_param / (ranks if zero >= 1 else 1)
    buffers = 0.0
    if zero == 3:
        layers = model.layers / para.pipeline if model.layers else 1.0
        per_layer = per_gpu / max(1.0, layers)
        buffers = per_layer * (2.0 * mem.weight_bytes_per_param + mem.grad_bytes_per_param)
    activations, in_flight, interleave = 0.0, 0.0, 1.0
    m = microbatches(scenario)
    if model.seq_len and model.layers and model.hidden and m:
        p, v = para.pipeline, para.virtual_stages
        in_flight = min(p, m)
        if v > 1:
            interleave = 1.0 + (p - 1) / (p * v)
        layers_held = in_flight * model.layers / p * interleave
        activations = activation_bytes_per_layer(scenario) * layers_held
        if para.recompute == "full":
            recomputed = replace_recompute(scenario, "selective")
            activations += activation_bytes_per_layer(recomputed)
    return MemoryUse(
        weights / 1e9,
        gradients / 1e9,
        optimizer / 1e9,
        activations / 1e9,
        in_flight,
        scenario.cluster.gpu_spec.memory_GB,
        interleave,
        buffers / 1e9,
    )


def replace_recompute(scenario: Scenario, recompute: str) -> Scenario:
    para = scenario.parallelism.model_copy(update={"recompute": recompute})
    return scenario.model_copy(update={"parallelism": para})
