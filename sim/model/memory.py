"""GPU memory as modern stacks use it: model states by their precisions, as Megatron-LM's
distributed-optimizer documentation tabulates them, sharded by tensor × pipeline and by the
ZeRO stage over the data-parallel ranks; the activations the first pipeline stage holds
(FlashAttention-style by default, Korthikanti et al. 2022) in flight as Megatron's schedules
keep them; ZeRO-3's gathered buffers. Whether it fits is `sim.model.perf`'s call: an
estimate within MEMORY_UNCERTAINTY of the GPU's memory runs, with a warning."""

from __future__ import annotations

from dataclasses import dataclass

from sim.model.batch import data_parallel_size, microbatches
from sim.model.schema import MemoryConfig, Scenario

PRECISION_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}

# How far the estimate may be from what a framework allocates, as a share of the GPU's
# memory: it leaves out the CUDA context, NCCL's buffers, the allocator's fragmentation and
# the communication buckets (a few GB together), and it counts a GPT layer's activations
# (Korthikanti et al.), which a given model's layer (gated MLP, fused kernels, tensors freed
# early as Llama 3 does) may keep a few GB more or less of. Within it of the memory, a
# configuration runs and the model warns, naming the margin; beyond it, it is refused.
MEMORY_UNCERTAINTY = 0.1


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
    bytes_per_param: float = 0.0  # the model states per parameter of the GPU's shard

    @property
    def margin_GB(self) -> float:
        """What is left of the GPU's memory (negative: how much more the estimate needs)."""
        return self.capacity_GB - self.total_GB

    @property
    def uncertainty_GB(self) -> float:
        return MEMORY_UNCERTAINTY * self.capacity_GB

    @property
    def fits(self) -> bool:
        """Within the estimate's uncertainty of the GPU's memory or below it."""
        return self.margin_GB >= -self.uncertainty_GB

    @property
    def near_limit(self) -> bool:
        """Within the estimate's uncertainty of the GPU's memory, on either side."""
        return abs(self.margin_GB) <= self.uncertainty_GB

    @property
    def total_GB(self) -> float:
        return (
            self.weights_GB
            + self.gradients_GB
            + self.optimizer_GB
            + self.activations_GB
            + self.zero3_buffers_GB
        )


@dataclass(frozen=True)
class StateBytes:
    """Bytes per parameter of the model states: the weights, the gradients (both replicated
    over the data-parallel ranks up to ZeRO 2 and 3), and what the optimizer shards (ZeRO 1,
    Megatron's distributed optimizer): fp32 main weights unless the weights are fp32 already,
    fp32 main gradients unless the gradients are fp32 already, and Adam's two moments."""

    weights: float
    gradients: float
    optimizer: float

    def per_param(self, ranks: int, zero_stage: int) -> float:
        """Bytes per parameter with `zero_stage` over `ranks` ranks: Megatron's table, e.g.
        bf16 weights and gradients 20, and 4 + 16/d with the distributed optimizer."""
        return (
            self.weights / (ranks if zero_stage >= 3 else 1)
            + self.gradients / (ranks if zero_stage >= 2 else 1)
            + self.optimizer / (ranks if zero_stage >= 1 else 1)
        )


def state_bytes(memory: MemoryConfig) -> StateBytes:
    """The model states' bytes per parameter from the precisions (Megatron-LM,
    docs/distrib_optimizer: fp16/bf16 parameters with 16-bit gradients 20 = 2 + 2 + 16,
    with fp32 gradients 18 = 2 + 4 + 12, fp32 parameters 16 = 4 + 4 + 8), or as the
    *_bytes_per_param keys give them."""
    weights = PRECISION_BYTES[memory.param_precision]
    gradients = PRECISION_BYTES[memory.grad_precision]
    moments = 2.0 * PRECISION_BYTES[memory.moment_precision]
    main_weights = 4.0 if memory.param_precision != "fp32" else 0.0
    main_grads = 4.0 if memory.grad_precision != "fp32" else 0.0
    optimizer = moments + main_weights + main_grads
    return StateBytes(
        weights if memory.weight_bytes_per_param is None else memory.weight_bytes_per_param,
        gradients if memory.grad_bytes_per_param is None else memory.grad_bytes_per_param,
        optimizer if memory.optimizer_bytes_per_param is None else memory.optimizer_bytes_per_param,
    )


# Korthikanti et al. 2022 (§4.1): a transformer layer keeps 34·s·b·h bytes of activations
# (with tensor and sequence parallelism: over t) besides the attention scores' 5·a·s²·b
KEPT_BYTES_PER_TOKEN_HIDDEN = 34.0


SCORES_BYTES = 5.0


def kept_bytes_per_token_hidden(scenario: Scenario) -> float:
    """A layer's kept activations per token and hidden unit, with FlashAttention-style
    attention (Korthikanti et al. 2022, §4.1, the scores never stored): 34 for a GPT layer,
    of which the keys and values are 2 + 2 (with grouped-query attention, kv_heads/heads of
    that) and the two dropout masks 1 + 1 (none without dropout, `memory.dropout: false`)."""
    model = scenario.model
    heads = model.heads or (model.hidden or 128) / 128
    kv_share = (model.kv_heads or heads) / heads
    kept = KEPT_BYTES_PER_TOKEN_HIDDEN - 4.0 * (1.0 - kv_share)
    return kept if scenario.memory.dropout else kept - 2.0


def activation_bytes_per_layer(scenario: Scenario) -> float:
    """Activations one layer keeps for one microbatch on one GPU (Korthikanti et al. 2022,
    with tensor and sequence parallelism over t GPUs, and context parallelism splitting
    the sequence over c): s/c·b·h/t · k with FlashAttention-style attention (the scores
    are never stored: `memory.attention: flash`, the default) or selective recomputation
    (the attention core is recomputed), k = 34 for a GPT layer (`kept_bytes_per_token_hidden`:
    less with grouped-query attention or without dropout); s/c·b·h/t · (k + 5·a·s/h) with
    the scores stored and no recomputation (`memory.attention: stored-scores`; 4·a·s/h
    without dropout's mask); and only the layer's input, 2·s/c·b·h/t, with full
    recomputation."""
    model, para = scenario.model, scenario.parallelism
    assert model.seq_len and model.hidden
    s, b, h, t = model.seq_len, para.micro_batch_size, model.hidden, para.tensor
    base = s / para.context * b * h / t
    if para.recompute == "full":
        return 2.0 * base
    kept = kept_bytes_per_token_hidden(scenario)
    if para.recompute == "selective" or scenario.memory.attention == "flash":
        return kept * base
    heads = model.heads or h / 128
    scores = SCORES_BYTES if scenario.memory.dropout else SCORES_BYTES - 1.0
    return base * (kept + scores * heads * s / h)


def in_flight_chunks(pipeline: int, virtual_stages: int, microbatches: float) -> float:
    """Microbatch-chunks whose activations the first pipeline stage holds at its peak, as
    Megatron-Core's schedules run (pipeline_parallel/schedules.py): 1F1B warms up with
    p − 1 forward passes and holds min(p, m) microbatches; the interleaved schedule warms
    up with 2·(p − 1) + (v − 1)·p chunk forwards, holding one more, at most all m·v.
    Each chunk holds layers/(p·v) layers: with m ≥ p that is Megatron's own estimate
    (theoretical_memory_usage.py), (1 + (p − 1)/(p·v)) × the 1F1B's p microbatches."""
    p, v = pipeline, virtual_stages
    if v == 1:
        return float(min(p, microbatches))
    return float(min(microbatches * v, 2 * (p - 1) + (v - 1) * p + 1))


def sharding_ranks(scenario: Scenario) -> int:
    """The ranks ZeRO shards a model state over: the data-parallel replicas, and with
    context parallelism their context ranks (they hold the same parameters)."""
    return data_parallel_size(scenario) * scenario.parallelism.context


def memory_use(scenario: Scenario) -> MemoryUse:
    """Model states (`state_bytes`) sharded by tensor × pipeline and by the data-parallel ×
    context ranks as the ZeRO stage says (1 the optimizer's states, Megatron's distributed
    optimizer; 2 and the gradients; 3 and the weights; Rajbhandari et al. 2020), plus the
    activations of the first pipeline stage (`in_flight_chunks`); full recomputation also
    holds one layer's activations while it is recomputed. ZeRO-3 adds the buffers of the
    layer it computes and the one it prefetches (their gathered parameters) and one layer's
    gradients before their reduce-scatter."""
    model, para = scenario.model, scenario.parallelism
    ranks = sharding_ranks(scenario)
    per_gpu = model.params / (para.tensor * para.pipeline)
    zero = para.zero_stage
    states = state_bytes(scenario.memory)
    weights = per_gpu * states.weights / (ranks if zero >= 3 else 1)
    gradients = per_gpu * states.gradients / (ranks if zero >= 2 else 1)
    optimizer = per_gpu * states.optimizer / (ranks if zero >= 1 else 1)
    buffers = 0.0
    if zero == 3:
        layers = model.layers / para.pipeline if model.layers else 1.0
        per_layer = per_gpu / max(1.0, layers)
        buffers = per_layer * (2.0 * states.weights + states.gradients)
    activations, in_flight, interleave = 0.0, 0.0, 1.0
    m = microbatches(scenario)
    if model.seq_len and model.layers and model.hidden and m:
        p, v = para.pipeline, para.virtual_stages
        chunks = in_flight_chunks(p, v, m)
        in_flight = min(p, m)
        interleave = chunks / (v * in_flight)
        layers_held = chunks * model.layers / (p * v)
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
        states.per_param(ranks, zero),
    )


def replace_recompute(scenario: Scenario, recompute: str) -> Scenario:
    para = scenario.parallelism.model_copy(update={"recompute": recompute})
    return scenario.model_copy(update={"parallelism": para})
