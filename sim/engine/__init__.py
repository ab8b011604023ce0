"""The SimPy model of one replica: job, cluster, failure sources and storage.

`simulate_replica(plan, replica, seed)` builds the model, runs it and returns a
`RunRecord`. Nothing here imports pandas or matplotlib.
"""

from sim.engine.plan import FailureClassPlan, ReplicaPlan, build_plan
from sim.engine.simulate import Failure, RunRecord, StragglerOnset, simulate_replica

__all__ = [
    "Failure",
    "FailureClassPlan",
    "ReplicaPlan",
    "RunRecord",
    "StragglerOnset",
    "build_plan",
    "simulate_replica",
]
