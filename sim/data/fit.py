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
    Lives,
    RepairFit,
    dispersion,
    fit_lemons,
    fit_lifetime,
    fit_repairs,
    gamma_spread,
    poisson_rate,
    renewal_counts,
    renewal_lives,
    renewal_rate,
)
from sim.data.fleet_estimates import (
    MIN_REFAIL_REPAIRS,
    MIN_TREND_EVENTS,
    RefailFit,
    TrendFit,
    fit_refail,
    fit_trend_from_log,
    recurrence_weights,
    return_gaps,
    spread_beyond,
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
    refail: RefailFit | None = None  # repairs that do not hold, when the log shows them
    recurrences: float = 0.0  # the expected recurrences among the class's failures
    age: str = "in_service"  # the nodes at the window's start: new, or long in service
    repair_mean_hours: float | None = None  # the log's mean repair time (None: none logged)

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
            "refail": None if self.refail is None else self.refail.doc(),
            "recurrences": self.recurrences,
            "age": self.age,
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
    trend: TrendFit | None = None
    node_cv: float = 0.0  # the spread written: beyond the laws' and recurrences' own

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
                # nodes long in service: the rate is failures per exposure, which is 1/mean
                # only in the renewal process's equilibrium (docs/fitting.md); a log that
                # starts with the fleet has new nodes
                item["age"] = c.age
            if c.repair_mean_hours is not None:
                # the log's own mean: the engine's flat repairs (exponential) of this mean give
                # back the log's downtime, whatever law the times follow (or how few they are)
                item["repair_hours"] = _round(c.repair_mean_hours)
            if c.refail is not None:
                item["refail_prob"] = _round(c.refail.prob.value)
                item["refail_hours"] = _round(c.refail.hours.value)
            failures.append(item)
        doc: dict[str, Any] = {"failures": failures}
        if self.lemons is not None and self.lemons.has_lemons:
            doc["cluster"] = {
                "lemon_fraction": _round(min(self.lemons.fraction.value, 0.99)),
                "lemon_rate_multiplier": _round(max(1.0, self.lemons.multiplier.value)),
                # the log's lemons failed more often the whole window, repairs or not
                "lemons_permanent": True,
            }
        elif self.lemons is not None and self.lemons.spread == "gamma" and self.node_cv > 0:
            doc["cluster"] = {"node_rate_cv": _round(min(self.node_cv, 10.0))}
        if self.trend is not None and self.trend.written:
            doc.setdefault("cluster", {})["aging"] = {
                "beta": _round(self.trend.beta.value),
                "rated_at_days": _round(self.trend.rated_h / 24.0),
            }
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
            "trend": None if self.trend is None else self.trend.doc(),
            "node_rate_cv_written": self.node_cv,
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
    """The fit in the order its parts depend on each other (docs/fitting.md): the fleet's
    trend; each class's repairs that do not hold, whose recurrences are then set aside;
    each class's law on its other failures in the trend's operational time; the spread
    between nodes beyond what the laws and the recurrences give; the laws again on lives
    paced by each node's own rate, and the spread again with them."""
    events = log.events
    warnings = list(log.warnings)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
    names = list(dict.fromkeys(sorted(events["class"].unique()))) if len(events) else []
    window = log.window_hours

    attributable = events[events["scope"].isin(NODE_SCOPES) & (events["node"] >= 0)]
    named = attributable["node"].nunique()
    nodes = max(log.nodes, named)

    trend = None
    if len(attributable) >= MIN_TREND_EVENTS:
        trend = fit_trend_from_log(
            attributable["time_h"].to_numpy(dtype=float), window, log.fleet_age_hours
        )
    aging = trend is not None and trend.written
    # a log that starts with the fleet (a burn-in seen from its first day) has new nodes:
    # their first lives are whole; any other log's nodes are long in service
    new_fleet = aging and trend.start_h == 0.0
    multiplier = trend.mean_multiplier if aging else 1.0

    def operational(times: np.ndarray) -> np.ndarray:
        return np.asarray(trend.operational(times), dtype=float) if aging else times

    order = events.sort_values(["node", "time_h"], kind="stable").index.to_numpy()
    ordered = events.loc[order].reset_index(drop=True)
    o_times = ordered["time_h"].to_numpy(dtype=float)
    o_nodes = ordered["node"].to_numpy()
    o_repairs = ordered["repair_hours"].to_numpy(dtype=float)
    o_classes = ordered["class"].to_numpy()
    counts = np.bincount(attributable["node"].to_numpy(dtype=np.int64), minlength=nodes)
    counts = counts.astype(float)
    raw_pace = _gamma_pace(counts)

    classes: list[_Class] = []
    for name in names:
        rows = events[events["class"] == name]
        scopes = rows["scope"].value_counts()
        scope = str(scopes.index[0])
        if len(scopes) > 1:
            warnings.append(
                f"{name}: rows of several scopes ({', '.join(scopes.index)}): {scope} written"
            )
        k = len(rows)
        if k < MIN_EVENTS_RATE:
            warnings.append(
                f"{name}: only {k} failures (< {MIN_EVENTS_RATE}): the rate rests on too few "
                "events to trust beyond its interval"
            )
        item = _Class(name, scope, k, np.flatnonzero(o_classes == name))
        repairs = rows["repair_hours"].dropna().to_numpy(dtype=float)
        if np.count_nonzero(repairs > 0):
            item.repair_mean = float(np.mean(repairs))
        if np.count_nonzero(repairs > 0) >= MIN_REPAIRS:
            item.repair = fit_repairs(repairs)
        elif len(repairs):
            warnings.append(
                f"{name}: {np.count_nonzero(repairs > 0)} repair times above 0 "
                f"(< {MIN_REPAIRS}): no repair law fitted"
            )
        if scope in NODE_SCOPES and len(repairs) >= MIN_REFAIL_REPAIRS:
            _fit_recurrences(item, o_times, o_nodes, o_repairs, o_classes, window, nodes,
                             raw_pace, trend if aging else None, multiplier)  # fmt: skip
        classes.append(item)

    def fit_laws(pace: np.ndarray | None) -> None:
        for item in classes:
            if item.events < MIN_EVENTS_SHAPE:
                continue
            keep = item.rows[~item.recurrent]
            node_ids = o_nodes[keep] if item.scope in NODE_SCOPES else np.full(len(keep), -1)
            lives = renewal_lives(
                operational(o_times[keep]),
                node_ids,
                float(operational(np.array(window))),
                nodes if item.scope in NODE_SCOPES else 0,
                pace=None if pace is None or item.scope not in NODE_SCOPES else pace[node_ids],
                unseen_pace=1.0 if pace is None else float(pace_of_unseen),
            )
            if new_fleet and item.scope in NODE_SCOPES:
                lives = Lives(
                    whole=np.concatenate((lives.whole, lives.first)),
                    whole_cut=np.concatenate((lives.whole_cut, lives.first_cut)),
                    first=np.array([]),
                    first_cut=np.array([]),
                    ties=lives.ties,
                )
            item.lives = lives
            item.lifetime = fit_lifetime(lives)

    pace_of_unseen = 1.0
    fit_laws(None)
    for item in classes:
        if item.lives is not None and item.lives.ties:
            warnings.append(
                f"{item.name}: {item.lives.ties} failure(s) logged at the same time as another "
                "of the same node: merged into it for the lifetime law (the rate counts every row)"
            )
        if item.events < MIN_EVENTS_SHAPE:
            warnings.append(
                f"{item.name}: {item.events} failures (< {MIN_EVENTS_SHAPE}): no Weibull shape "
                "fitted, exponential written"
            )

    lemons = None
    node_cv = 0.0
    if len(events) == 0:
        pass  # nothing to fit, said below
    elif len(attributable) < MIN_EVENTS_LEMONS or nodes < MIN_NODES_LEMONS:
        warnings.append(
            f"lemons: {len(attributable)} node failures on {nodes} nodes, fewer than "
            f"{MIN_EVENTS_LEMONS} failures (or {MIN_NODES_LEMONS} nodes): no dispersion test, "
            "no lemons written"
        )
    else:
        horizon = float(operational(np.array(window)))
        null = _null_counts(classes, nodes, horizon, window, new_fleet, rng)
        lemons = fit_lemons(counts, rng, null=dispersion(null))
        if lemons.overdispersed and lemons.spread == "gamma":
            # the spread beyond the laws' and the recurrences' own, and the laws again on
            # lives paced by it (twice: the laws' spread depends on the pace)
            for _ in range(2):
                node_cv = spread_beyond(lemons.node_cv.value, counts, null)
                if node_cv <= 0:
                    break
                pace = _gamma_pace(counts, node_cv)
                pace_of_unseen = float(_gamma_pace(np.zeros(1), node_cv, counts)[0])
                fit_laws(pace)
                null = _null_counts(classes, nodes, horizon, window, new_fleet, rng)
            node_cv = spread_beyond(lemons.node_cv.value, counts, null)
        elif lemons.has_lemons:
            pace_of_unseen = float(lemons.pace(np.zeros(1))[0])
            fit_laws(lemons.pace(counts))
    excess = 1.0
    if lemons is not None and lemons.has_lemons:
        f, m = lemons.fraction.value, lemons.multiplier.value
        excess = 1 - f + f * m  # lemons fail m× as often: the class's rate of a sound node

    exposure = log.gpu_days / 1000.0  # per 1,000 GPU-days
    fitted = []
    for item in classes:
        rate = poisson_rate(item.events, exposure)
        law = item.lifetime
        if law is not None and law.chosen == "weibull":
            rate = renewal_rate(item.events, exposure, law.shape.value)
        # the rate written: the class's own failures (not its recurrences, which the engine
        # adds), in the rated fleet's time, of a sound node
        own = item.events - item.recurrences
        written = own / exposure / (multiplier if item.scope in NODE_SCOPES else 1.0)
        written /= excess if item.scope in NODE_SCOPES else 1.0
        lives = item.lives
        fitted.append(
            ClassFit(
                item.name, item.scope, item.events, rate, law, item.repair, written,
                np.array([]) if lives is None else lives.whole,
                np.array([]) if lives is None else lives.whole_cut,
                item.refail, item.recurrences,
                "new" if new_fleet and item.scope in NODE_SCOPES else "in_service",
                item.repair_mean,
            )
        )  # fmt: skip
    if not fitted:
        warnings.append("the log has no failures: nothing to fit")
    return FitResult(
        log.source, log.window_hours, log.nodes, log.gpus_per_node, log.gpu_days, fitted,
        lemons, warnings, trend, node_cv,
    )  # fmt: skip


@dataclass
class _Class:
    """A class while it is fitted: its rows (in the log sorted by node and time), which of
    them are recurrences of a repair that did not hold, and its laws."""

    name: str
    scope: str
    events: int
    rows: np.ndarray
    repair: RepairFit | None = None
    refail: RefailFit | None = None
    repair_mean: float | None = None
    recurrent: np.ndarray | None = None  # per row of `rows`: set aside as a recurrence
    recurrences: float = 0.0  # the expected recurrences among the class's failures
    lives: Lives | None = None
    lifetime: LifetimeFit | None = None

    def __post_init__(self):
        self.recurrent = np.zeros(len(self.rows), dtype=bool)


def _gamma_pace(counts: np.ndarray, cv: float | None = None, of: np.ndarray | None = None):
    """A node's expected rate over the mean node's given its count, under a gamma spread of
    coefficient of variation `cv` (from the counts `of`, by default `counts`, when None): the
    gamma posterior's mean (r + n)/(r + n̄), r = 1/cv²."""
    of = counts if of is None else of
    if cv is None:
        cv = gamma_spread(of)[0].value if np.mean(of) > 0 else 0.0
    if cv <= 1e-6:
        return np.ones_like(counts, dtype=float)
    shape = 1.0 / cv**2
    return (shape + counts) / (shape + float(np.mean(of)))


def _fit_recurrences(
    item: _Class,
    times: np.ndarray,
    nodes: np.ndarray,
    repairs: np.ndarray,
    classes: np.ndarray,
    window: float,
    fleet: int,
    pace: np.ndarray,
    trend: TrendFit | None,
    multiplier: float,
) -> None:
    """The class's repairs that do not hold (`fit_refail`): each return's time to the node's
    next failure of the class, against the node's own hazard then (the class's rate, the
    node's pace from its count, the trend's multiplier at that age); the failures most
    likely recurrences are set aside for the class's law."""
    same = classes == item.name
    index, back, gaps, seen, following = return_gaps(times, nodes, repairs, same, window)
    if len(index) < MIN_REFAIL_REPAIRS:
        return
    rate = item.events / (fleet * window * multiplier)  # per node-hour, rated fleet
    at = 1.0 if trend is None else ((trend.start_h + back) / trend.rated_h) ** (trend.beta.value - 1)
    base = rate * pace[nodes[index]] * at
    found = fit_refail(gaps, seen, base)
    if not found.written:
        return
    item.refail = found
    weights = recurrence_weights(found, gaps, seen, base)
    item.recurrences = float(np.sum(weights))
    likely = following[(weights > 0.5) & (following >= 0)]
    item.recurrent = np.isin(item.rows, likely)


def _null_counts(
    classes: list[_Class],
    nodes: int,
    horizon: float,
    window: float,
    new_fleet: bool,
    rng: np.random.Generator,
) -> np.ndarray:
    """Draws of every node's failures in the window when all nodes are alike: each node class
    a renewal process of its fitted law in operational time (`horizon` long), exponential ones
    at the class's own rate, plus each failure's recurrences (a geometric chain of
    probability p: n failures bring NegBin(n, 1 − p) more)."""
    laws = []
    for item in classes:
        if item.scope not in NODE_SCOPES:
            continue
        own = max(item.events - item.recurrences, 1e-9)
        law = item.lifetime
        if law is not None and law.chosen == "weibull":
            laws.append((law.shape.value, law.scale_hours, item))
        else:
            laws.append((1.0, horizon / own * nodes, item))
    total = None
    for shape, scale, item in laws:
        drawn = renewal_counts([(shape, scale)], nodes, horizon, rng, new=new_fleet)
        if item.refail is not None:
            p = item.refail.prob.value
            drawn = drawn + np.where(
                drawn > 0, rng.negative_binomial(np.maximum(drawn, 1), 1 - p), 0
            )
        total = drawn if total is None else total + drawn
    return total


# --------------------------------------------------------------------------- output


WRITTEN_RATE = "rate written (sound nodes)"
# with a trend or recurrences the rate written is a node's own failures at the rated age
WRITTEN_OWN_RATE = "rate written (own failures, rated age)"


def table_rows(result: FitResult) -> list[tuple[str, str, float, float, float, int | str]]:
    """(what, parameter, value, low, high, events) for every fitted number, in print order."""
    rows: list[tuple[str, str, float, float, float, int | str]] = []
    for c in result.classes:
        rows.append((c.name, "rate per 1k GPU-days", *_triple(c.rate), c.events))
        if c.written_rate != c.rate.value:  # lemons: failures.yaml has a sound node's rate
            label = WRITTEN_RATE
            if c.recurrences or (result.trend is not None and result.trend.written):
                label = WRITTEN_OWN_RATE
            rows.append((c.name, label, _round(c.written_rate), math.nan, math.nan, c.events))
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
        if c.repair_mean_hours is not None:
            rows.append(
                (c.name, "repair hours written (the log's mean)",
                 _round(c.repair_mean_hours), math.nan, math.nan,
                 c.repair.repairs if c.repair is not None else "")
            )  # fmt: skip
        if c.refail is not None:
            rows.append(
                (c.name, "repair does not hold (probability)", *_triple(c.refail.prob),
                 c.refail.repairs)
            )  # fmt: skip
            rows.append(
                (c.name, "... fails again after (hours, mean)", *_triple(c.refail.hours),
                 f"~{c.recurrences:.0f} recurrences")
            )  # fmt: skip
    trend = result.trend
    if trend is not None:
        rows.append(
            ("fleet", "trend: rate ∝ age^(β−1), β", *_triple(trend.beta),
             "-> written" if trend.written else "-> none")
        )  # fmt: skip
        if trend.written:
            rows.append(
                ("fleet", "age at the window's start (days)", trend.start_h / 24.0, math.nan,
                 math.nan, "")
            )  # fmt: skip
            rows.append(
                ("fleet", "rates written at age (days)", trend.rated_h / 24.0, math.nan,
                 math.nan, f"x{trend.mean_multiplier:.3g} the window's mean")
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
            rows.append(
                ("nodes", "rate CV of the counts (negative binomial)", *_triple(lemons.node_cv),
                 lemons.events)
            )  # fmt: skip
            rows.append(
                ("nodes", "node_rate_cv written (beyond the laws' own)", _round(result.node_cv),
                 math.nan, math.nan, lemons.events)
            )  # fmt: skip
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
