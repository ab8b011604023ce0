"""Checkpoint size and what moving it costs: the tier's share and the nodes' own
bandwidth, the write, the load, the snapshot, the read-back validation, the backup copy
and restore, and what a step waits for (pure functions of the scenario)."""

from __future__ import annotations

from sim.model.schema import Scenario, StorageConfig


def checkpoint_GB(scenario: Scenario) -> float:
    return scenario.model.params * scenario.checkpoint.state_bytes_per_param / 1e9


def tier_share_GB_s(tier_GB_s: float, background_load: float) -> float:
    """What other tenants leave of a tier's bandwidth."""
    return tier_GB_s * (1.0 - background_load)


def storage_GB_s(tier_GB_s: float, nodes: int, client_GB_s_per_node: float) -> float:
    """What `nodes` nodes get from a tier that offers `tier_GB_s`: the tier, or their own
    client paths if thinner. The one place this formula lives (the engine's plan uses it)."""
    return min(tier_GB_s, nodes * client_GB_s_per_node)


def write_GB_s(storage: StorageConfig, nodes: int) -> float:
    """Checkpoint write bandwidth. Sync writes pause training, so its data reads do not compete."""
    tier = tier_share_GB_s(storage.checkpoint_tier.write_GB_s, storage.background_load)
    return storage_GB_s(tier, nodes, storage.client_GB_s_per_node)


def read_GB_s(storage: StorageConfig, nodes: int) -> float:
    tier = tier_share_GB_s(storage.checkpoint_tier.read_GB_s, storage.background_load)
    return storage_GB_s(tier, nodes, storage.client_GB_s_per_node)


def checkpoint_write_s(scenario: Scenario, nodes: int | None = None) -> float:
    """A whole checkpoint to the tier: the tier's latency plus size / write bandwidth."""
    nodes = scenario.cluster.nodes if nodes is None else nodes
    latency = scenario.storage.checkpoint_tier.latency_ms / 1e3
    return latency + checkpoint_GB(scenario) / write_GB_s(scenario.storage, nodes)


def checkpoint_load_s(scenario: Scenario, nodes: int | None = None) -> float:
    nodes = scenario.cluster.nodes if nodes is None else nodes
    latency = scenario.storage.checkpoint_tier.latency_ms / 1e3
    return latency + checkpoint_GB(scenario) / read_GB_s(scenario.storage, nodes)


def backup_copy_s(scenario: Scenario) -> float:
    """Copying one checkpoint to the backup tier (it runs in the background)."""
    backup = scenario.storage.backup
    assert backup is not None
    return backup.latency_ms / 1e3 + checkpoint_GB(scenario) / backup.write_GB_s


def backup_restore_s(scenario: Scenario) -> float:
    """Loading a checkpoint back from the backup tier (limited by the job's client paths too)."""
    backup = scenario.storage.backup
    assert backup is not None
    bandwidth = storage_GB_s(
        backup.read_GB_s, scenario.cluster.nodes, scenario.storage.client_GB_s_per_node
    )
    return backup.latency_ms / 1e3 + checkpoint_GB(scenario) / bandwidth


def snapshot_s(scenario: Scenario, nodes: int | None = None) -> float:
    """Async: the device-to-host copy of a node's share of the state (the part that blocks)."""
    nodes = scenario.cluster.nodes if nodes is None else nodes
    return checkpoint_GB(scenario) / nodes / scenario.checkpoint.snapshot_GB_s_per_node


def checkpoint_validate_s(scenario: Scenario) -> float:
    """Reading a checkpoint back to validate it (`checkpoint.validate`), else 0."""
    return checkpoint_load_s(scenario) if scenario.checkpoint.validate_writes else 0.0


def checkpoint_blocking_s(scenario: Scenario) -> float:
    """What a checkpoint costs training: the write and its validation (sync) or the
    snapshot (async: the write and validation drain in the background)."""
    if scenario.checkpoint.mode == "async":
        return snapshot_s(scenario)
    return checkpoint_write_s(scenario) + checkpoint_validate_s(scenario)
