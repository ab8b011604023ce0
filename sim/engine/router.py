"""The failure router: the one door every failure passes through, from the failure sources
and from tests that inject failures. It counts each failure once (only while the job runs)
and hands it to the owner of the struck component: the fabric, the storage tier, or the job.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.engine.cluster import Cluster
from sim.engine.events import Failure
from sim.engine.job import Job
from sim.engine.ledger import Ledger


class FailureRouter:
    """The one door every failure passes through, from the failure sources and from tests
    that inject failures: counted once (only while the job runs), then handed to the
    owner of the struck component: the fabric for cables and switches (a leaf switch
    comes back to the job as a failure of its nodes), the storage tier, or the job. A
    silent corruption goes to the job, which notices it at its detection (`Job.silent_struck`)
    and sends it back through here (`found`) to its owner."""

    def __init__(self, ledger: Ledger, job: Job, cluster: Cluster):
        self.ledger = ledger
        self.job = job
        self.cluster = cluster
        self.handlers: dict[str, Callable[[Failure], None]] = {}
        self.faults_matter = job.plan.faults_matter
        self.attributable = [fc.attributable for fc in job.plan.failure_classes]
        self.silent = [fc.silent for fc in job.plan.failure_classes]
        self.incidents = None  # the incident log (sim/engine/incidents.py), when one is kept

    def register(self, scopes: tuple[str, ...], handler: Callable[[Failure], None]) -> None:
        for scope in scopes:
            self.handlers[scope] = handler

    def route(self, failure: Failure) -> None:
        """Count the failure (while the job runs) and hand it to its owner."""
        if not self.job.running:
            return
        if failure.since_s is not None:  # a silent corruption found now: counted when it struck
            self.handlers.get(failure.scope, self.job.strike)(failure)
            return
        if self.silent[failure.class_index] and not self.job.holds_state:
            return  # no training state on the GPUs while the job is down: nothing to corrupt
        self.count(failure.class_index, failure.nodes[0] if failure.nodes else -1)
        if self.incidents is not None:
            self._log(failure)
        if self.silent[failure.class_index]:  # nobody notices until its detection
            self.job.silent_struck(failure)
            return
        self.handlers.get(failure.scope, self.job.strike)(failure)

    def found(self, found: Failure, struck: Failure) -> None:
        """A silent corruption (`struck`) is noticed now (`found`, by `Job.silent_struck`):
        logged as the same incident, and handed to its owner."""
        if self.incidents is not None:
            self.incidents.alias(found, struck)
        self.route(found)

    def _log(self, failure: Failure) -> None:
        """The failure into the incident log: its node (the first it struck) and whether that
        node had a lasting fault."""
        cluster = self.cluster
        node = int(cluster.slot_node[failure.nodes[0]]) if failure.nodes else -1
        lasting = node >= 0 and bool(cluster.faulty[node])
        self.incidents.struck(failure, node, lasting)

    def count(self, class_index: int, slot: int) -> None:
        """A failure of the class that struck the node in `slot` (-1: no node of its own),
        counted; and as a lemon's when faults matter, the class is the node's own and the
        node has a lasting fault."""
        self.ledger.failures[class_index] += 1
        if (
            self.faults_matter
            and slot >= 0
            and self.attributable[class_index]
            and self.cluster.is_faulty(slot)
        ):
            self.ledger.failures_lemon += 1
