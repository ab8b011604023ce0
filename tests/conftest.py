"""Shared builders: a tiny scenario with round numbers so engine tests have exact answers.

Step time 1 s (6e12 FLOPs per step on 4 GPUs of 2 TFLOPS at MFU 0.75), 1,000
steps, a 10 GB checkpoint written at 1 GB/s (10 s) and loaded at 2 GB/s (5 s).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from sim.scenario import Scenario, load_document

ROOT = Path(__file__).resolve().parents[1]

TINY: dict[str, Any] = {
    "name": "tiny",
    "model": {
        "params": 1.0e9,
        "tokens": 1.0e6,
        "global_batch_tokens": 1000,
        "flops_per_token": 6.0e9,
    },
    "cluster": {
        "gpu": {"name": "test", "peak_tflops": 2.0},
        "nodes": 2,
        "gpus_per_node": 2,
        "spare_nodes": 0,
    },
    "performance": {"mfu": 0.75},
    "storage": {
        "checkpoint_tier": {
            "kind": "lustre",
            "write_GB_s": 1.0,
            "read_GB_s": 2.0,
            "capacity_TB": 1.0,
            "latency_ms": 0.0,
        },
        "client_GB_s_per_node": 100.0,
    },
    "checkpoint": {"interval_steps": 100, "state_bytes_per_param": 10},
    "failures": [],
    "recovery": {"policy": "restart", "restart_minutes": 10},
    "simulation": {"replicas": 10, "seed": 1, "horizon_days": 30},
}


def merge(base: dict, changes: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def identity_error(record) -> float:
    """Relative error of wall = ideal + slowdown + lost_work + checkpoint_stall + downtime."""
    r = record
    parts = (
        r.ideal_hours
        + r.slowdown_hours
        + r.lost_work_hours
        + r.checkpoint_stall_hours
        + r.downtime_hours
    )
    return abs(parts - r.wall_hours) / max(r.wall_hours, 1e-12)


def tiny(**changes: Any) -> Scenario:
    """The tiny scenario with section-wise changes: tiny(checkpoint={"interval_steps": 50})."""
    return load_document(merge(TINY, changes), "tiny").base


@pytest.fixture
def root() -> Path:
    return ROOT
