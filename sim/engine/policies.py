"""Recovery policies: how many nodes the job runs on after a failure, keyed by the
scenario's `recovery.policy` (`restart`, `elastic`)."""

from __future__ import annotations

from sim.engine.plan import ReplicaPlan


class RestartPolicy:
    """Wait until the full complement of nodes is there, then restart."""

    grows = False

    def __init__(self, plan: ReplicaPlan):
        self.plan = plan

    def nodes_to_run(self, available: int) -> int | None:
        return self.plan.nodes if available >= self.plan.nodes else None


class ElasticPolicy:
    """Carry on with the whole data-parallel replicas the available nodes hold,
    if at least `elastic_min_fraction` of them remain; grow back at a checkpoint."""

    grows = True

    def __init__(self, plan: ReplicaPlan):
        self.plan = plan

    def nodes_to_run(self, available: int) -> int | None:
        replicas = self.plan.replicas_on(available)
        if replicas < self.plan.elastic_min_replicas:
            return None
        return self.plan.nodes_for(replicas)


POLICIES: dict[str, type[RestartPolicy] | type[ElasticPolicy]] = {
    "restart": RestartPolicy,
    "elastic": ElasticPolicy,
}
