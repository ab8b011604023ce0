"""Failure classes fitted from an incident log (`fit_log`): the fleet's trend with its age,
per class its rate, lifetime law, repairs that do not hold and repair times, lemons or a
spread between nodes (fitted with the laws), with a warning where too few events say
nothing; the table of `trainsim fit` and the scenario fragment that reproduces them
(`fragment_yaml`). Reading the log is `sim.data.logs`; the estimators are
`sim.data.estimates`, `sim.data.fleet_estimates` and `sim.data.frailty`; the fleet run back
is `sim.data.fleet_check`. docs/fitting.md gives the format and every formula.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

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
    poisson_mixture,
    poisson_rate,
    renewal_counts,
    renewal_lives,
    renewal_rate,
)
from sim.data.fleet_estimates import (
    MIN_REFAIL_REPAIRS,
    MIN_TREND_EVENTS,
    Baseline,
    RefailFit,
    TrendFit,
    fit_refail,
    fit_trend_from_log,
    recurrence_weights,
    return_gaps,
)
from sim.data.frailty import NodeLives, fit_frailty, held_at_one
from sim.data.logs import NODE_SCOPES, IncidentLog
from sim.model.schema import MAX_RATE_PER_1K, MIN_WEIBULL_SHAPE
from sim.runs import arguments as check

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
    written: Estimate | None = None  # the rate written with its interval

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
            "written_rate_interval": None if self.written is None else self.written.doc(),
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
    node_cv_fit: Estimate | None = None  # ... with its interval, fitted with the laws

    def fragment(self) -> dict[str, Any]:
        """The scenario keys the fit gives: `failures:` (a list that replaces a scenario's
        own), and `cluster.lemon_*` when the counts showed lemons."""
        failures = []
        for c in self.classes:
            item: dict[str, Any] = {
                "name": c.name,
                "scope": c.scope,
                # within the schema's bound (a job-wide class of a small job can fail faster)
                "rate_per_1k_gpu_day": _round(min(c.written_rate, MAX_RATE_PER_1K)),
                "distribution": c.distribution,
            }
            if c.distribution == "weibull":
                # the engine's shortest shape (below it, lives span too many scales to run)
                item["weibull_shape"] = _round(max(c.lifetime.shape.value, MIN_WEIBULL_SHAPE))
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
        elif self.lemons is not None and self.lemons.spread == "gamma" and self.node_cv >= 1e-6:
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
            "node_rate_cv_fit": None if self.node_cv_fit is None else self.node_cv_fit.doc(),
            "warnings": self.warnings,
            "fragment": self.fragment(),
        }


def _round(value: float) -> float:
    return float(f"{value:.4g}")


def fit_log(log: IncidentLog, seed: int = 0) -> FitResult:
    """Every class's rate, lifetime law and repair times; lemons from the per-node counts.
    The optimisers' floating-point warnings (a likelihood probed far from its maximum) are
    theirs to handle, not the user's to read."""
    if not isinstance(log, IncidentLog):
        raise check.ArgumentError(
            "fit_log", "log",
            f"expected an IncidentLog (sim.data.logs.read_log(path)), not {type(log).__name__}",
        )  # fmt: skip
    seed = check.seed("fit_log", seed)
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
    raw_pace, raw_unseen = _count_pace(counts)

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
        classes.append(item)

    def class_lives(
        item: _Class, recurrent: np.ndarray, pace: np.ndarray | None, unseen: float
    ) -> Lives:
        keep = item.rows[~recurrent]
        node_ids = o_nodes[keep] if item.scope in NODE_SCOPES else np.full(len(keep), -1)
        lives = renewal_lives(
            operational(o_times[keep]),
            node_ids,
            float(operational(np.array(window))),
            nodes if item.scope in NODE_SCOPES else 0,
            pace=None if pace is None or item.scope not in NODE_SCOPES else pace[node_ids],
            unseen_pace=unseen,
        )
        if new_fleet and item.scope in NODE_SCOPES:
            lives = Lives(
                whole=np.concatenate((lives.whole, lives.first)),
                whole_cut=np.concatenate((lives.whole_cut, lives.first_cut)),
                first=np.array([]),
                first_cut=np.array([]),
                ties=lives.ties,
            )
        return lives

    def fit_laws(pace: np.ndarray | None, unseen: float = 1.0) -> None:
        for item in classes:
            if item.events >= MIN_EVENTS_SHAPE:
                item.lives = class_lives(item, item.recurrent, pace, unseen)
                item.lifetime = fit_lifetime(item.lives)

    fit_laws(None)
    # the repairs that do not hold, against each class's own hazard after a repair, and the
    # laws on the failures that are not their recurrences, in turn until they agree: a law
    # with a decreasing hazard, restarted by the repair, and recurrences both make failures
    # follow repairs closely (started from an exponential law, which gives the recurrences
    # all of it; three rounds)
    recurring = [
        item for item in classes
        if item.scope in NODE_SCOPES
        and np.count_nonzero(~np.isnan(o_repairs[item.rows])) >= MIN_REFAIL_REPAIRS
    ]  # fmt: skip
    found_any = False
    for round_ in range(3):
        for item in recurring:
            _fit_recurrences(item, o_times, o_nodes, o_repairs, o_classes, window, nodes,
                             raw_pace, trend if aging else None, multiplier,
                             None if round_ == 0 else item.lifetime)  # fmt: skip
        # a class without recurrences against the exponential (the round that finds the
        # most) has none against its own law either
        recurring = [item for item in recurring if item.refail is not None]
        if not recurring:
            break
        found_any = True
        # the laws on lives paced by each node's rate from its count: the baseline above
        # takes the node's pace apart, so its law must not hold the spread as well
        fit_laws(raw_pace, raw_unseen)
    if found_any:
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
    node_cv, node_cv_fit = 0.0, None
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
            # the spread and the node classes' laws together (a node's rate shared by its
            # classes, integrated out): neither is read twice
            node_cv_fit = _fit_jointly(classes, o_times, o_nodes, operational, window, nodes,
                                       new_fleet, lemons.node_cv.value)  # fmt: skip
            if recurring:
                # the recurrences once more, against the laws and the spread fitted together
                # (the paced laws above miss part of a decreasing hazard's first hours), and
                # the laws and the spread again without them
                pace = _gamma_pace(counts, node_cv_fit.value)
                for item in recurring:
                    _fit_recurrences(item, o_times, o_nodes, o_repairs, o_classes, window,
                                     nodes, pace, trend if aging else None, multiplier,
                                     item.lifetime)  # fmt: skip
                node_cv_fit = _fit_jointly(classes, o_times, o_nodes, operational, window,
                                           nodes, new_fleet, node_cv_fit.value, warm=True)  # fmt: skip
            node_cv = node_cv_fit.value
            # which failures are recurrences is itself uncertain (as p is), and a class's
            # shape moves with how many are set aside: its interval takes in the shapes
            # (of lives paced by the nodes' counts) with as many set aside as p's interval
            # gives at either end
            for item in classes:
                law, refail = item.lifetime, item.refail
                if law is None or refail is None or item.events < MIN_EVENTS_SHAPE:
                    continue
                shapes = []
                for p in (refail.prob.low, refail.prob.value, refail.prob.high):
                    recurrent = item.set_aside(item.recurrences * p / refail.prob.value)
                    lives = class_lives(item, recurrent, raw_pace, raw_unseen)
                    shapes.append(fit_lifetime(lives).shape.value)
                low = law.shape.low * min(1.0, min(shapes) / shapes[1])
                high = law.shape.high * max(1.0, max(shapes) / shapes[1])
                wider = Estimate(law.shape.value, low, high, law.shape.events)
                chosen = law.chosen if not low <= 1.0 <= high else "exponential"
                item.lifetime = dataclasses.replace(law, shape=wider, chosen=chosen)
        elif lemons.has_lemons:
            fit_laws(lemons.pace(counts), float(lemons.pace(np.zeros(1))[0]))
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
        node_class = item.scope in NODE_SCOPES
        written = own / exposure / (multiplier if node_class else 1.0)
        written /= excess if node_class else 1.0
        # its interval: the own failures' count, whose variance the law (a renewal process's
        # CV²) and the spread between nodes (c²·n̄ of a gamma mixture of Poisson counts) add
        # to, over the trend's mean multiplier at either end of β's interval
        phi = 1.0
        if law is not None and law.chosen == "weibull":
            k = law.shape.value
            phi = max(1.0, math.gamma(1 + 2 / k) / math.gamma(1 + 1 / k) ** 2 - 1)
        if node_class and node_cv > 0:
            phi += node_cv**2 * item.events / nodes
        counted = poisson_rate(own / phi, exposure / phi)
        low_m = high_m = multiplier if node_class else 1.0
        if aging and node_class:
            ends = [trend.mean_multiplier_at(b) for b in (trend.beta.low, trend.beta.high)]
            low_m, high_m = min(ends + [multiplier]), max(ends + [multiplier])
        scale = excess if node_class else 1.0
        written_interval = Estimate(
            written, counted.low / high_m / scale, counted.high / low_m / scale, item.events
        )
        lives = item.lives
        fitted.append(
            ClassFit(
                item.name, item.scope, item.events, rate, law, item.repair, written,
                np.array([]) if lives is None else lives.whole,
                np.array([]) if lives is None else lives.whole_cut,
                item.refail, item.recurrences,
                "new" if new_fleet and item.scope in NODE_SCOPES else "in_service",
                item.repair_mean, written_interval,
            )
        )  # fmt: skip
    for c in fitted:
        if c.written_rate > MAX_RATE_PER_1K:
            warnings.append(
                f"{c.name}: rate {c.written_rate:.4g} per 1,000 GPU-days written as "
                f"{MAX_RATE_PER_1K:g}, the most a scenario takes"
            )
        if c.distribution == "weibull" and c.lifetime.shape.value < MIN_WEIBULL_SHAPE:
            warnings.append(
                f"{c.name}: Weibull shape {c.lifetime.shape.value:.3g} written as "
                f"{MIN_WEIBULL_SHAPE:g}, the least a scenario takes"
            )
    if not fitted:
        warnings.append("the log has no failures: nothing to fit")
    return FitResult(
        log.source, log.window_hours, log.nodes, log.gpus_per_node, log.gpu_days, fitted,
        lemons, warnings, trend, node_cv, node_cv_fit,
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

    weights: np.ndarray | None = None  # per return: the chance its next failure recurs
    following: np.ndarray | None = None  # ... and that failure's row (-1: none seen)

    def __post_init__(self):
        self.recurrent = np.zeros(len(self.rows), dtype=bool)

    def set_aside(self, expected: float) -> np.ndarray:
        """The rows to set aside as recurrences when `expected` of them are: as many, the
        likeliest first (a threshold would drop more or fewer, and each primary failure
        dropped, or recurrence kept, bends the class's law: a short life lost, or one too
        many)."""
        if self.weights is None:
            return np.zeros(len(self.rows), dtype=bool)
        count = int(round(expected))
        likely = self.following[np.argsort(-self.weights, kind="stable")[:count]]
        return np.isin(self.rows, likely[likely >= 0])


def _fit_jointly(
    classes: list[_Class],
    times: np.ndarray,
    nodes: np.ndarray,
    operational,
    window: float,
    fleet: int,
    new_fleet: bool,
    start_cv: float,
    warm: bool = False,
) -> Estimate:
    """`fit_frailty` over the node classes: each class's law (a shape where it has enough
    failures, else exponential) and the spread between nodes; a class is written Weibull when
    its shape's interval excludes 1 and the likelihood ratio against the exponential (the
    class's shape held at 1, its scale maximised again) says so by AIC. Returns the spread
    with its interval."""
    # the classes with a law to fit (the few failures of the others say little of a node)
    node_classes = [c for c in classes if c.scope in NODE_SCOPES and c.events >= MIN_EVENTS_SHAPE]
    horizon = float(operational(np.array(window)))
    named = [int(np.max(nodes[c.rows])) + 1 for c in node_classes if len(c.rows)]
    fleet = max([fleet, *named])  # nodes named beyond --nodes (spares that swapped in)
    lives = []
    for item in node_classes:
        keep = item.rows[~item.recurrent]
        lives.append(
            NodeLives.of(
                item.name,
                item.events >= MIN_EVENTS_SHAPE,
                operational(times[keep]),
                nodes[keep].astype(np.int64),
                horizon,
                fleet,
                new_fleet,
            )  # fmt: skip
        )
    shapes = [
        c.lifetime.shape.value if c.lifetime is not None and c.events >= MIN_EVENTS_SHAPE else 1.0
        for c in node_classes
    ]
    scales = [
        horizon * fleet / max(c.events - c.recurrences, 1.0) / math.gamma(1 + 1 / k)
        for c, k in zip(node_classes, shapes)
    ]
    # the likelihood can have two modes (a strong decreasing hazard and no spread, or the
    # reverse): started from both, the better kept (once: `warm` starts from a joint fit)
    starts = (shapes,) if warm else (shapes, [1.0] * len(lives))
    joint = max(
        (fit_frailty(lives, start, scales, start_cv) for start in starts),
        key=lambda found: found.loglik,
    )
    for i, item in enumerate(node_classes):
        if not lives[i].free_shape:
            continue
        flat = held_at_one(lives, joint, item.name)
        shape = joint.shapes[item.name]
        k, scale = shape.value, joint.scales[item.name]
        aic_weibull, aic_exponential = 2.0 - 2.0 * joint.loglik, -2.0 * flat
        chosen = (
            "weibull"
            if aic_weibull < aic_exponential and not shape.low <= 1.0 <= shape.high
            else "exponential"
        )
        item.lifetime = LifetimeFit(
            flat, joint.loglik, aic_exponential, aic_weibull,
            scale * math.gamma(1 + 1 / k), shape, scale, chosen,
        )  # fmt: skip
    return joint.cv


def _count_pace(counts: np.ndarray) -> tuple[np.ndarray, float]:
    """Each node's rate over the mean node's from its count alone (and a node's that never
    failed), before any law is fitted: under the gamma spread or the two-point lemons,
    whichever the counts' likelihood prefers (by AIC); nodes alike when the counts are
    not overdispersed against Poisson."""
    if len(counts) < 2 or np.mean(counts) <= 0:
        return np.ones_like(counts, dtype=float), 1.0
    if stats.chi2.sf(float(dispersion(counts)), len(counts) - 1) >= 0.05:
        return np.ones_like(counts, dtype=float), 1.0
    gamma_cv, gamma_loglik = gamma_spread(counts)
    mixture = poisson_mixture(counts)
    if 6 - 2 * mixture.loglik < 4 - 2 * gamma_loglik:
        mean = 1 - mixture.fraction + mixture.fraction * min(mixture.multiplier, 1000.0)
        return (
            mixture.node_multiplier(counts) / mean,
            float(mixture.node_multiplier(np.zeros(1))[0]) / mean,
        )
    pace = _gamma_pace(counts, gamma_cv.value)
    return pace, float(_gamma_pace(np.zeros(1), gamma_cv.value, counts)[0])


def _gamma_pace(counts: np.ndarray, cv: float, of: np.ndarray | None = None) -> np.ndarray:
    """A node's expected rate over the mean node's given its count, under a gamma spread of
    coefficient of variation `cv` over the counts `of` (by default `counts`): the gamma
    posterior's mean (r + n)/(r + n̄), r = 1/cv²."""
    of = counts if of is None else of
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
    law: LifetimeFit | None,
) -> None:
    """The class's repairs that do not hold (`fit_refail`): each return's time to the node's
    next failure of the class, against the node's own hazard then (the class's rate, the
    node's pace from its count, the trend's multiplier at that age); the failures most
    likely recurrences are set aside for the class's law."""
    same = classes == item.name
    index, back, gaps, seen, following = return_gaps(times, nodes, repairs, same, window)
    if len(index) < MIN_REFAIL_REPAIRS:
        return
    at = (
        1.0 if trend is None else ((trend.start_h + back) / trend.rated_h) ** (trend.beta.value - 1)
    )
    pace_at = pace[nodes[index]] * at  # the node's own rate and the fleet's age, then
    item.refail, item.recurrences, item.weights, item.following = None, 0.0, None, None
    item.recurrent = np.zeros(len(item.rows), dtype=bool)
    if law is not None and law.chosen == "weibull":
        k, scale = law.shape.value, law.scale_hours
    else:
        k, scale = 1.0, fleet * window * multiplier / item.events
    clipped = np.maximum(gaps, 1e-3)
    cumulative = (pace_at * clipped / scale) ** k
    base = Baseline(k * cumulative / clipped, cumulative)
    found = fit_refail(gaps, seen, base)
    if not found.written:
        return
    item.refail = found
    item.weights = recurrence_weights(found, gaps, seen, base)
    item.following = following
    item.recurrences = float(np.sum(item.weights))
    item.recurrent = item.set_aside(item.recurrences)


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
            low, high = (
                (math.nan, math.nan) if c.written is None else (c.written.low, c.written.high)
            )
            rows.append((c.name, label, _round(c.written_rate), low, high, c.events))
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
            fitted = result.node_cv_fit
            rows.append(
                ("nodes", "node_rate_cv written (fitted with the laws)", _round(result.node_cv),
                 math.nan if fitted is None else fitted.low,
                 math.nan if fitted is None else fitted.high, lemons.events)
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
