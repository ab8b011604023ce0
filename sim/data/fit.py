"""Failure classes fitted from an incident log (`fit_log`): per class its rate, lifetime
law and repair times, lemons over the node counts, with a warning where too few events
say nothing; the table of `trainsim fit` and the scenario fragment that reproduces them
(`fragment_yaml`). Reading the log is `sim.data.logs`; the estimators are
`sim.data.estimates`. docs/fitting.md gives the format and every formula.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim.data.estimates import (
    Estimate,
    LemonFit,
    LifetimeFit,
    RepairFit,
    dispersion,
    fit_lemons,
    fit_lifetime,
    fit_repairs,
    poisson_rate,
    renewal_counts,
    renewal_lives,
    renewal_rate,
)
from sim.data.logs import NODE_SCOPES, IncidentLog

# Below these counts the estimate is replaced by a warning (docs/fitting.md).
MIN_EVENTS_RATE = 5  # a class's rate: printed with its exact interval, but warned below this
MIN_EVENTS_SHAPE = 20  # a Weibull shape needs this many failures of the class
MIN_EVENTS_LEMONS = 30  # the dispersion test needs this many node failures ...
MIN_NODES_LEMONS = 10  # ... on at least this many nodes
MIN_REPAIRS = 5  # a repair-time law needs this many repair times


# --------------------------------------------------------------------------- a whole log


@dataclass(frozen=True)
class ClassFit:
    name: str
    scope: str
    events: int
    rate: Estimate  # per 1,000 GPU-days
    lifetime: LifetimeFit | None  # None below MIN_EVENTS_SHAPE
    repair: RepairFit | None
    written_rate: float  # the rate written (divided by the lemons' excess when they are)
    # whole lives (between two failures of a component) and those cut by the window's end,
    # in the written rate's time: what the lifetime figure shows against the fitted laws
    observed: np.ndarray = field(default_factory=lambda: np.array([]), repr=False)
    censored: np.ndarray = field(default_factory=lambda: np.array([]), repr=False)

    @property
    def distribution(self) -> str:
        return self.lifetime.chosen if self.lifetime is not None else "exponential"

    def doc(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scope": self.scope,
            "events": self.events,
            "rate_per_1k_gpu_day": self.rate.doc(),
            "lifetime": None if self.lifetime is None else self.lifetime.doc(),
            "distribution": self.distribution,
            "repair": None if self.repair is None else self.repair.doc(),
            "written_rate_per_1k_gpu_day": self.written_rate,
        }


@dataclass(frozen=True)
class FitResult:
    source: str
    window_hours: float
    nodes: int
    gpus_per_node: int
    gpu_days: float
    classes: list[ClassFit]
    lemons: LemonFit | None
    warnings: list[str]

    def fragment(self) -> dict[str, Any]:
        """The scenario keys the fit gives: `failures:` (a list that replaces a scenario's
        own), and `cluster.lemon_*` when the counts showed lemons."""
        failures = []
        for c in self.classes:
            item: dict[str, Any] = {
                "name": c.name,
                "scope": c.scope,
                "rate_per_1k_gpu_day": _round(c.written_rate),
                "distribution": c.distribution,
            }
            if c.distribution == "weibull":
                item["weibull_shape"] = _round(c.lifetime.shape.value)
                # the log's nodes were in service: the rate is failures per exposure, which
                # is 1/mean only in the renewal process's equilibrium (docs/fitting.md)
                item["age"] = "in_service"
            if c.repair is not None:
                # the log's own mean: the engine's flat repairs (exponential) of this mean give
                # back the log's downtime, whatever law the times follow
                item["repair_hours"] = _round(c.repair.sample_mean_hours)
            failures.append(item)
        doc: dict[str, Any] = {"failures": failures}
        if self.lemons is not None and self.lemons.has_lemons:
            doc["cluster"] = {
                "lemon_fraction": _round(min(self.lemons.fraction.value, 0.99)),
                "lemon_rate_multiplier": _round(max(1.0, self.lemons.multiplier.value)),
                # the log's lemons failed more often the whole window, repairs or not
                "lemons_permanent": True,
            }
        elif self.lemons is not None and self.lemons.spread == "gamma":
            doc["cluster"] = {"node_rate_cv": _round(min(self.lemons.node_cv.value, 10.0))}
        return doc

    def doc(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "window_hours": self.window_hours,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "gpu_days": self.gpu_days,
            "classes": [c.doc() for c in self.classes],
            "lemons": None if self.lemons is None else self.lemons.doc(),
            "warnings": self.warnings,
            "fragment": self.fragment(),
        }


def _round(value: float) -> float:
    return float(f"{value:.4g}")


def fit_log(log: IncidentLog, seed: int = 0) -> FitResult:
    """Every class's rate, lifetime law and repair times; lemons from the per-node counts.
    The optimisers' floating-point warnings (a likelihood probed far from its maximum) are
    theirs to handle, not the user's to read."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _fit_log(log, seed)


def _fit_log(log: IncidentLog, seed: int) -> FitResult:
    events = log.events
    warnings = list(log.warnings)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
    per_1k_gpu_days = log.gpu_days / 1000.0
    names = list(dict.fromkeys(sorted(events["class"].unique()))) if len(events) else []

    attributable = events[events["scope"].isin(NODE_SCOPES) & (events["node"] >= 0)]
    named = attributable["node"].nunique()
    nodes = max(log.nodes, named)

    fitted = []  # per class: name, scope, failures, rate, lifetime law, repair law, lives
    for name in names:
        rows = events[events["class"] == name]
        scopes = rows["scope"].value_counts()
        scope = str(scopes.index[0])
        if len(scopes) > 1:
            warnings.append(
                f"{name}: rows of several scopes ({', '.join(scopes.index)}): {scope} written"
            )
        k = len(rows)
        rate = poisson_rate(k, per_1k_gpu_days)
        if k < MIN_EVENTS_RATE:
            warnings.append(
                f"{name}: only {k} failures (< {MIN_EVENTS_RATE}): the rate rests on too few "
                "events to trust beyond its interval"
            )
        node_ids = rows["node"].to_numpy()
        lives = renewal_lives(
            rows["time_h"].to_numpy(dtype=float),
            node_ids if scope in NODE_SCOPES else np.full(k, -1),
            log.window_hours,
            nodes if scope in NODE_SCOPES else 0,
        )
        if lives.ties:
            warnings.append(
                f"{name}: {lives.ties} failure(s) logged at the same time as another of the "
                "same node: merged into it for the lifetime law (the rate counts every row)"
            )
        lifetime = None
        if k >= MIN_EVENTS_SHAPE:
            lifetime = fit_lifetime(lives)
        else:
            warnings.append(
                f"{name}: {k} failures (< {MIN_EVENTS_SHAPE}): no Weibull shape fitted, "
                "exponential written"
            )
        repairs = rows["repair_hours"].dropna().to_numpy(dtype=float)
        repair = None
        if np.count_nonzero(repairs > 0) >= MIN_REPAIRS:
            repair = fit_repairs(repairs)
        elif len(repairs):
            warnings.append(
                f"{name}: {np.count_nonzero(repairs > 0)} repair times above 0 "
                f"(< {MIN_REPAIRS}): no repair law fitted"
            )
        fitted.append((name, scope, k, rate, lifetime, repair, lives))

    lemons = None
    if len(events) == 0:
        pass  # nothing to fit, said below
    elif len(attributable) < MIN_EVENTS_LEMONS or nodes < MIN_NODES_LEMONS:
        warnings.append(
            f"lemons: {len(attributable)} node failures on {nodes} nodes, fewer than "
            f"{MIN_EVENTS_LEMONS} failures (or {MIN_NODES_LEMONS} nodes): no dispersion test, "
            "no lemons written"
        )
    else:
        counts = np.zeros(nodes)
        per_node = attributable["node"].value_counts().to_numpy()
        counts[: len(per_node)] = per_node
        # a node class with a Weibull law spreads the counts by itself: the test's null is
        # drawn from the classes' own laws (exponential ones as Poisson counts)
        laws = [
            (life.shape.value, life.scale_hours)
            if life is not None and life.chosen == "weibull"
            else (1.0, log.window_hours / max(k, 1) * nodes)
            for _, scope, k, _, life, _, _ in fitted
            if scope in NODE_SCOPES
        ]
        null = None
        if any(shape != 1.0 for shape, _ in laws):
            null = dispersion(renewal_counts(laws, nodes, log.window_hours, rng))
        lemons = fit_lemons(counts, rng, null=null)
    excess = 1.0
    if lemons is not None and lemons.has_lemons:
        f, m = lemons.fraction.value, lemons.multiplier.value
        excess = 1 - f + f * m  # lemons fail m× as often: the class's rate of a sound node
    if lemons is not None and lemons.overdispersed:
        # the spread between nodes is the lemons' (or the gamma's) now: each node class's law
        # is fitted again on lives in the written rate's time (a node's stretched by its
        # expected rate), so a decreasing hazard does not count the same spread again
        by_node = attributable["node"].value_counts()
        unseen_pace = float(lemons.pace(np.zeros(1))[0])
        for i, (name, scope, k, rate, lifetime, repair, lives) in enumerate(fitted):
            if scope not in NODE_SCOPES or lifetime is None:
                continue
            rows = events[events["class"] == name]
            node_ids = rows["node"].to_numpy()
            pace = lemons.pace(by_node.reindex(node_ids).to_numpy())
            lives = renewal_lives(
                rows["time_h"].to_numpy(dtype=float),
                node_ids,
                log.window_hours,
                nodes,
                pace=pace,
                unseen_pace=unseen_pace,
            )
            fitted[i] = (name, scope, k, rate, fit_lifetime(lives), repair, lives)

    classes = [
        ClassFit(
            name,
            scope,
            k,
            rate
            if lifetime is None or lifetime.chosen != "weibull"
            else renewal_rate(k, per_1k_gpu_days, lifetime.shape.value),
            lifetime,
            repair,
            rate.value / (excess if scope in NODE_SCOPES else 1.0),
            lives.whole,
            lives.whole_cut,
        )
        for name, scope, k, rate, lifetime, repair, lives in fitted
    ]
    if not classes:
        warnings.append("the log has no failures: nothing to fit")
    return FitResult(
        log.source, log.window_hours, log.nodes, log.gpus_per_node, log.gpu_days, classes,
        lemons, warnings,
    )  # fmt: skip


# --------------------------------------------------------------------------- output


WRITTEN_RATE = "rate written (sound nodes)"


def table_rows(result: FitResult) -> list[tuple[str, str, float, float, float, int | str]]:
    """(what, parameter, value, low, high, events) for every fitted number, in print order."""
    rows: list[tuple[str, str, float, float, float, int | str]] = []
    for c in result.classes:
        rows.append((c.name, "rate per 1k GPU-days", *_triple(c.rate), c.events))
        if c.written_rate != c.rate.value:  # lemons: failures.yaml has a sound node's rate
            rows.append(
                (c.name, WRITTEN_RATE, _round(c.written_rate), math.nan, math.nan, c.events)
            )
        if c.lifetime is not None:
            life = c.lifetime
            rows.append((c.name, "Weibull shape", *_triple(life.shape), c.events))
            rows.append(
                (c.name, "AIC Weibull - AIC exponential", life.aic_weibull - life.aic_exponential,
                 math.nan, math.nan, f"-> {life.chosen}")
            )  # fmt: skip
        if c.repair is not None:
            label = f"repair hours (mean, {c.repair.chosen})"
            rows.append((c.name, label, *_triple(c.repair.mean), c.repair.repairs))
            rows.append(
                (c.name, "repair hours written (the log's mean)",
                 _round(c.repair.sample_mean_hours), math.nan, math.nan, c.repair.repairs)
            )  # fmt: skip
    if result.lemons is not None:
        lemons = result.lemons
        rows.append(
            ("lemons", f"dispersion p-value ({lemons.test})", lemons.p_value,
             math.nan, math.nan, lemons.events)
        )  # fmt: skip
        if lemons.overdispersed:
            rows.append(
                ("lemons", "AIC lemons - AIC gamma spread", lemons.aic_lemons - lemons.aic_gamma,
                 math.nan, math.nan, f"-> {lemons.spread}")
            )  # fmt: skip
        if lemons.spread == "gamma":
            rows.append(("nodes", "node_rate_cv", *_triple(lemons.node_cv), lemons.events))
        if lemons.has_lemons:
            rows.append(("lemons", "lemon_fraction", *_triple(lemons.fraction), lemons.events))
            rows.append(
                ("lemons", "lemon_rate_multiplier", *_triple(lemons.multiplier), lemons.events)
            )
    return rows


def _triple(estimate: Estimate) -> tuple[float, float, float]:
    return estimate.value, estimate.low, estimate.high


def fragment_yaml(result: FitResult) -> str:
    """The fragment as YAML, with a header saying where it came from and how to use it."""
    import yaml

    head = (
        f"# fitted by trainsim fit from {result.source}: {result.nodes} nodes x "
        f"{result.gpus_per_node} GPUs over {result.window_hours:,.1f} h "
        f"({result.gpu_days:,.0f} GPU-days)\n"
        '# use: trainsim run SCENARIO --set "failures=$(cat failures.yaml)" '
        "(and --set cluster.KEY=VALUE for each cluster key below)\n"
    )
    return head + yaml.safe_dump(result.fragment(), sort_keys=False)
