"""How a job and its batch split over the GPUs: the GPUs of one data-parallel replica,
the replicas, the sequences of a step and the microbatches each replica runs."""

from __future__ import annotations

from sim.model.schema import Scenario


def sequences_per_step(scenario: Scenario) -> float | None:
    """Sequences in the global batch (global_batch_tokens / seq_len); None for an abstract
    job (no model.seq_len)."""
    model = scenario.model
    return None if model.seq_len is None else model.global_batch_tokens / model.seq_len


def microbatches(scenario: Scenario, replicas: int | None = None) -> float | None:
    """Microbatches per data-parallel replica and step: sequences / replicas /
    micro_batch_size (real-valued when an elastic shrink leaves a share that does not
    divide: the bubble then uses the average); an abstract job's `parallelism.microbatches`."""
    sequences = sequences_per_step(scenario)
    if sequences is None:
        return scenario.parallelism.microbatches
    replicas = data_parallel_size(scenario) if replicas is None else replicas
    return sequences / replicas / scenario.parallelism.micro_batch_size


def gpus_per_replica(scenario: Scenario) -> int:
    para = scenario.parallelism
    return para.tensor * para.context * para.pipeline


def data_parallel_size(scenario: Scenario) -> int:
    return scenario.cluster.gpus // gpus_per_replica(scenario)
