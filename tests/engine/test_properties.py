"""Invariants over random small scenarios (hypothesis): the time identity, exact
accounting of finished runs, node conservation (asserted inside the engine), over
every failure scope including fabric cables and switches on small fat trees."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sim.engine import build_plan, simulate_replica
from sim.scenario import ScenarioError
from tests.conftest import identity_error, tiny

failure_class = st.fixed_dictionaries(
    {
        "scope": st.sampled_from(["gpu", "node", "job", "link", "switch", "storage"]),
        "mtbf_hours": st.floats(0.02, 5.0),
        "distribution": st.sampled_from(["exponential", "weibull", "lognormal"]),
        "detect_minutes": st.floats(0.0, 5.0),
        "repair_hours": st.floats(0.01, 2.0),
        "replace": st.booleans(),
        "loses_data": st.booleans(),
    }
)


def as_class(i: int, spec: dict) -> dict:
    out = {"name": f"c{i}", **spec}
    if spec["scope"] in ("job", "link", "storage"):
        out["replace"] = False
    if spec["scope"] != "storage":
        out["loses_data"] = False
    if spec["distribution"] == "weibull":
        out["weibull_shape"] = 0.8
    if spec["distribution"] == "lognormal":
        out["lognormal_sigma"] = 1.0
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.integers(1, 6),
    gpus_per_node=st.sampled_from([1, 2, 4]),
    spares=st.integers(0, 3),
    interval=st.integers(1, 400),
    policy=st.sampled_from(["restart", "elastic"]),
    min_fraction=st.floats(0.1, 1.0),
    classes=st.lists(failure_class, min_size=0, max_size=3),
    horizon_hours=st.floats(0.2, 20.0),
    seed=st.integers(0, 2**32 - 1),
    radix=st.sampled_from([4, 8, 64]),
    placement=st.sampled_from(["contiguous", "scattered"]),
    mode=st.sampled_from(["sync", "async"]),
    snapshot_GB_s=st.floats(0.5, 50.0),
    backup_every=st.integers(0, 4),
    memory_every=st.integers(0, 30),
    shared=st.booleans(),
    data_bytes=st.floats(0.0, 4e6),
    background=st.floats(0.0, 0.9),
)
def test_time_identity_holds_for_every_replica(
    nodes,
    gpus_per_node,
    spares,
    interval,
    policy,
    min_fraction,
    classes,
    horizon_hours,
    seed,
    radix,
    placement,
    mode,
    snapshot_GB_s,
    backup_every,
    memory_every,
    shared,
    data_bytes,
    background,
):
    try:
        scenario = tiny(
            cluster={"nodes": nodes, "gpus_per_node": gpus_per_node, "spare_nodes": spares},
            checkpoint={
                "interval_steps": interval,
                "mode": mode,
                "snapshot_GB_s_per_node": snapshot_GB_s,
                "memory_every_steps": memory_every or None,
            },
            failures=[as_class(i, c) for i, c in enumerate(classes)],
            recovery={"policy": policy, "elastic_min_fraction": min_fraction, "restart_minutes": 1},
            simulation={"horizon_days": horizon_hours / 24},
            network={"switch_radix": radix, "placement": placement},
            storage={
                "data_tier": "shared" if shared and not memory_every else "separate",
                "data_bytes_per_token": data_bytes,
                "background_load": background,
                **({"backup": {"kind": "object", "every": backup_every}} if backup_every else {}),
            },
        )
    except ScenarioError:
        # e.g. a fat tree too small for the nodes: refused at the edge, as it should be
        assume(False)
    plan = build_plan(scenario)
    r = simulate_replica(plan, 0, seed)
    assert identity_error(r) <= 1e-9
    assert (
        min(
            r.ideal_hours,
            r.slowdown_hours,
            r.lost_work_hours,
            r.checkpoint_stall_hours,
            r.downtime_hours,
        )
        >= -1e-12
    )
    assert r.wall_hours <= horizon_hours * (1 + 1e-12)
    if r.finished:
        assert abs(r.ideal_hours * 3600 - plan.total_steps * plan.step_s) < 1e-6
    assert r.failures == sum(r.failures_by_class.values())
    assert r.checkpoints_lost >= 0 and r.checkpoints_written >= (1 if r.finished else 0)
