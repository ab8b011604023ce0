"""A fit run back: the log's fleet as a scenario (`fleet_doc`: its nodes, the fitted classes,
repairs and spread, the trend from the window's start, every replica run to the window's
end), the measures a reliability engineer compares a log and a model on (`measures`),
and the check itself (`check`): the log beside the model's replicas, a verdict per
measure. docs/fitting.md gives the measures and their tolerances.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim.data.fit import FitResult
from sim.data.logs import NODE_SCOPES, IncidentLog

DAY_H = 24.0
MIN_CLASS_EVENTS = 20  # a class's count is judged when the log has this many of it


@dataclass(frozen=True)
class Measure:
    """One line of the check: what is measured, how far the model may be from the log
    (relative, or in points of a share), and the values."""

    key: str
    label: str
    log: float
    model: np.ndarray  # one value a replica
    relative: float | None = None  # allowed |model/log − 1|
    points: float | None = None  # allowed |model − log| in percentage points (a share)

    @property
    def mean(self) -> float:
        return float(np.mean(self.model))

    @property
    def range(self) -> tuple[float, float]:
        return float(np.quantile(self.model, 0.05)), float(np.quantile(self.model, 0.95))

    @property
    def share(self) -> bool:
        return self.points is not None and self.relative is None or self.key.startswith("share")

    def holds(self) -> bool | None:
        """Whether the model's mean is within the tolerance (None: not judged)."""
        if self.relative is None and self.points is None:
            return None
        ok = False
        if self.relative is not None and self.log > 0:
            ok = abs(self.mean / self.log - 1.0) <= self.relative
        if self.points is not None:
            ok = ok or abs(self.mean - self.log) * 100.0 <= self.points
        return ok

    @property
    def tolerance(self) -> str:
        parts = []
        if self.relative is not None:
            parts.append(f"{self.relative:.0%}")
        if self.points is not None:
            parts.append(f"{self.points:g} points")
        return " or ".join(parts) if parts else "-"

    def doc(self) -> dict[str, Any]:
        low, high = self.range
        return {
            "key": self.key,
            "measure": self.label,
            "log": self.log,
            "model_mean": self.mean,
            "model_p5": low,
            "model_p95": high,
            "tolerance": self.tolerance,
            "holds": self.holds(),
        }


def log_measures(events: pd.DataFrame, nodes: int, window_h: float) -> dict[str, float]:
    """The measures of one log (`time_h`, `node`, `class`, `scope`, `repair_hours`) of a fleet
    of `nodes` over `window_h` hours: failures per class and per quarter of the window,
    node-hours down (the repair times' sum), and over the failures of named nodes the share
    on the 10% most-failing nodes, the share of nodes that never fail, and the share of
    failures within a day of the same node's previous one."""
    out: dict[str, float] = {}
    for name, count in events["class"].value_counts().items():
        out[f"class:{name}"] = float(count)
    out["down"] = float(np.nansum(events["repair_hours"].to_numpy(dtype=float)))
    edges = np.linspace(0.0, window_h, 5)
    quarters = np.histogram(np.clip(events["time_h"].to_numpy(dtype=float), 0, window_h), edges)[0]
    for i, count in enumerate(quarters):
        out[f"quarter:{i + 1}"] = float(count)
    named = events[events["scope"].isin(NODE_SCOPES) & (events["node"] >= 0)]
    ids = named["node"].to_numpy(dtype=np.int64)
    fleet = max(nodes, int(ids.max()) + 1 if len(ids) else 0)
    counts = np.sort(np.bincount(ids, minlength=fleet))[::-1]
    top = max(1, round(fleet / 10))
    total = counts.sum()
    out["share:top10"] = float(counts[:top].sum() / total) if total else math.nan
    out["share:never"] = float(np.count_nonzero(counts == 0) / fleet) if fleet else math.nan
    ordered = named.sort_values(["node", "time_h"], kind="stable")
    gaps = ordered.groupby("node")["time_h"].diff().to_numpy(dtype=float)
    out["share:day"] = float(np.count_nonzero(gaps <= DAY_H) / len(gaps)) if len(gaps) else math.nan
    return out


LABELS = {
    "down": "node-hours down",
    "share:top10": "share of failures on the 10% most-failing nodes",
    "share:never": "share of nodes that never fail",
    "share:day": "share of failures within a day of the node's previous one",
}


def label(key: str) -> str:
    if key.startswith("class:"):
        return f"failures: {key[6:]}"
    if key.startswith("quarter:"):
        return f"failures in quarter {key[8:]} of the window"
    return LABELS[key]


def compare(logged: dict[str, float], replicas: list[dict[str, float]]) -> list[Measure]:
    """The log beside the model's replicas, measure by measure, with the tolerances of
    docs/fitting.md."""
    found = []
    for key, value in logged.items():
        model = np.array([r.get(key, 0.0) for r in replicas], dtype=float)
        relative = points = None
        if key.startswith("class:"):
            relative = 0.15 if value >= MIN_CLASS_EVENTS else None
        elif key == "down" or key.startswith("quarter:"):
            relative = 0.25
        elif key in ("share:top10", "share:never"):
            points = 8.0
        elif key == "share:day":
            relative, points = 0.35, 2.0
        found.append(Measure(key, label(key), value, model, relative, points))
    return found


def fleet_doc(result: FitResult, log: IncidentLog, replicas: int, seed: int) -> dict[str, Any]:
    """The log's fleet as a scenario: its nodes (GPUs per node as given), no spares (a node
    in repair is out of the fleet, as in the log), the fitted classes with their repairs,
    each node's failures sending it to repair at once (no detection), the spread and the
    trend from the fleet's age at the window's start, every replica run to the window's
    end; the job on it is a placeholder that never finishes."""
    fragment = result.fragment()
    cluster: dict[str, Any] = {
        "gpu": {"name": "fleet", "peak_tflops": 1.0},
        "nodes": log.nodes,
        "gpus_per_node": log.gpus_per_node,
        "spare_nodes": 0,
    }
    cluster.update(fragment.get("cluster", {}))
    if "aging" in cluster and result.trend is not None:
        cluster["aging"] = dict(cluster["aging"]) | {
            "age_days": _round(result.trend.start_h / DAY_H)
        }
    failures = []
    for item in fragment["failures"]:
        item = dict(item)
        item["detect_minutes"] = 0
        failures.append(item)
    name = "".join(ch if ch.isalnum() else "-" for ch in Path(result.source).stem.lower())
    return {
        "name": f"fleet-{name}"[:64].strip("-") or "fleet",
        "description": (
            f"The fleet of {result.source} as trainsim fit found it: {log.nodes} nodes over "
            f"{log.window_hours:,.1f} h. Every replica runs to the window's end (simulation."
            "until: horizon); the job is a placeholder. trainsim run --incidents writes its "
            "failures as a log like the input."
        ),
        "model": {
            "params": 1.0e6,
            "tokens": 1.0e6,
            "global_batch_tokens": 1000,
            "flops_per_token": 6.0e6,
        },
        "cluster": cluster,
        "performance": {"mfu": 0.5},
        "storage": {
            "checkpoint_tier": {
                "kind": "lustre",
                "write_GB_s": 100.0,
                "read_GB_s": 100.0,
                "capacity_TB": 1.0,
                "latency_ms": 0.0,
            },
            "client_GB_s_per_node": 100.0,
        },
        "checkpoint": {"interval_minutes": 1440},
        "failures": failures,
        "recovery": {"policy": "restart", "restart_minutes": 0},
        "simulation": {
            "replicas": replicas,
            "seed": seed,
            "horizon_days": _round(log.window_hours / DAY_H),
            "until": "horizon",
        },
    }


def _round(value: float) -> float:
    return float(f"{value:.10g}")


@dataclass
class Check:
    """The log and the model's replicas, measure by measure, with what the figures draw."""

    measures: list[Measure]
    log_counts: np.ndarray  # failures per node (named nodes), the log's
    model_counts: list[np.ndarray]  # ... each replica's
    log_times: np.ndarray  # failure times (hours), the log's
    model_times: list[np.ndarray]  # ... each replica's
    window_h: float
    replicas: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def judged(self) -> list[Measure]:
        return [m for m in self.measures if m.holds() is not None]

    @property
    def passed(self) -> int:
        return sum(bool(m.holds()) for m in self.judged)

    def doc(self) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "measures": [m.doc() for m in self.measures],
            "judged": len(self.judged),
            "within": self.passed,
        }


def node_counts(events: pd.DataFrame, nodes: int) -> np.ndarray:
    named = events[events["scope"].isin(NODE_SCOPES) & (events["node"] >= 0)]
    ids = named["node"].to_numpy(dtype=np.int64)
    return np.bincount(ids, minlength=max(nodes, int(ids.max()) + 1 if len(ids) else 0))


def as_events(incidents: pd.DataFrame) -> pd.DataFrame:
    """A trainsim incident log (time in hours since the run's start) in a fit's columns."""
    return pd.DataFrame(
        {
            "time_h": incidents["time"].to_numpy(dtype=float),
            "node": incidents["node"].to_numpy(dtype=np.int64),
            "class": incidents["class"].to_numpy(),
            "scope": incidents["scope"].to_numpy(),
            "repair_hours": incidents["repair_hours"].to_numpy(dtype=float),
        }
    )


def check(
    result: FitResult,
    log: IncidentLog,
    replicas: int = 20,
    seed: int = 0,
    workers: int | None = None,
    progress: bool = False,
) -> Check:
    """Run the fleet back (`fleet_doc`) and hold every replica's log against the input's."""
    from sim.model.scenario import load_document
    from sim.runs.incident_log import KEY
    from sim.runs.montecarlo import run

    scenario_set = load_document(fleet_doc(result, log, replicas, seed), "fleet.yaml")
    found: list[pd.DataFrame] = []

    def sink(point: int, first: int, frame: pd.DataFrame) -> None:
        found.append(frame.attrs.get(KEY))

    run(scenario_set, replicas, seed, workers=workers, progress=progress, sink=sink,
        incidents=True)  # fmt: skip
    incidents = pd.concat([f for f in found if f is not None], ignore_index=True)
    logged = log_measures(log.events, log.nodes, log.window_hours)
    runs, counts, times = [], [], []
    for replica in range(replicas):
        rows = as_events(incidents[incidents["replica"] == replica])
        runs.append(log_measures(rows, log.nodes, log.window_hours))
        counts.append(node_counts(rows, log.nodes))
        times.append(np.sort(rows["time_h"].to_numpy()))
    return Check(
        compare(logged, runs),
        node_counts(log.events, log.nodes),
        counts,
        np.sort(log.events["time_h"].to_numpy(dtype=float)),
        times,
        log.window_hours,
        replicas,
    )


def fleet_yaml(fleet: dict[str, Any], result: FitResult) -> str:
    """fleet.yaml: the fleet's scenario with a header saying what it is and how to run it."""
    import yaml

    head = (
        f"# the fleet of {result.source} as trainsim fit found it: {result.nodes} nodes x "
        f"{result.gpus_per_node} GPUs over {result.window_hours:,.1f} h\n"
        "# trainsim run fleet.yaml --incidents: its failures as logs like the input (time in "
        "hours from the window's start, node, class, repair_hours)\n"
    )
    return head + yaml.safe_dump(fleet, sort_keys=False)


def like_yaml(path: Path, result: FitResult, log: IncidentLog) -> str:
    """The scenario at `path` with the fit in place: the fitted failure classes instead of its
    own, the spread and the trend under cluster (the fleet at the log's end: the rates as
    written; set cluster.aging.age_days for a younger one). A node-scope class keeps a
    node's rate: on a scenario of other GPUs per node its rate per 1,000 GPU-days is scaled
    by the log's GPUs per node over the scenario's. Validated before it is written."""
    import yaml

    from sim.model.scenario import load_document, read_yaml
    from sim.model.scenario_set import ScenarioError
    from sim.model.schema import ClusterConfig

    doc = read_yaml(path)
    fragment = result.fragment()
    cluster = doc.setdefault("cluster", {})
    if not isinstance(cluster, dict):
        raise ScenarioError(str(path), "cluster", "expected a mapping (the scenario's cluster)")
    per_node = cluster.get("gpus_per_node", ClusterConfig.model_fields["gpus_per_node"].default)
    failures = []
    for item in fragment["failures"]:
        item = dict(item)
        if item["scope"] == "node" and isinstance(per_node, int) and per_node > 0:
            item["rate_per_1k_gpu_day"] = _round(
                item["rate_per_1k_gpu_day"] * log.gpus_per_node / per_node
            )
        failures.append(item)
    doc["failures"] = failures
    for key in ("lemon_fraction", "lemon_rate_multiplier", "lemons_permanent", "node_rate_cv",
                "aging"):  # fmt: skip
        cluster.pop(key, None)
    cluster.update(fragment.get("cluster", {}))
    load_document(doc, str(path))  # what is written runs
    head = (
        f"# {path} with the failures trainsim fit found in {result.source} (its classes, "
        "spread and trend) in place of its own\n"
    )
    return head + yaml.safe_dump(doc, sort_keys=False)
