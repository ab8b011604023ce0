"""Failure classes fitted from an incident log: rates with exact Poisson intervals, the
lifetime law (exponential against Weibull), lemons (a dispersion test, then a two-component
Poisson mixture), repair times, and the scenario fragment that reproduces them.

Reading the log (CSV or parquet, its columns and its window) is `read_log`; `fit_log` does
the statistics; `FitResult.fragment()` is the YAML a scenario takes. docs/fitting.md gives
the format and every formula.
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from sim.model.scenario import ScenarioError
from sim.model.schema import MAX_HOURS

# the columns a log may have (the last four are those trainsim adds to its own logs)
REQUIRED = ("time", "node")
OPTIONAL = ("class", "repair_hours", "scope", "replica", "point", "lasting_fault", "repair_path")
SCOPES = ("gpu", "node", "job", "link", "switch", "storage")
NODE_SCOPES = ("gpu", "node")  # node-attributable: the lemon test counts these
DEFAULT_CLASS = "all"

# Below these counts the estimate is replaced by a warning (docs/fitting.md).
MIN_EVENTS_RATE = 5  # a class's rate: printed with its exact interval, but warned below this
MIN_EVENTS_SHAPE = 20  # a Weibull shape needs this many failures of the class
MIN_EVENTS_LEMONS = 30  # the dispersion test needs this many node failures ...
MIN_NODES_LEMONS = 10  # ... on at least this many nodes
MIN_REPAIRS = 5  # a repair-time law needs this many repair times

LEVEL = 0.95
DISPERSION_ALPHA = 0.05  # counts overdispersed when the test's p-value is below this
BOOTSTRAP = 200  # resamples of the nodes for the mixture's intervals
HOURS_PER_DAY = 24.0


# --------------------------------------------------------------------------- the log


@dataclass(frozen=True)
class IncidentLog:
    """Failures in a window: `time_h` hours since the window's start, `node` a physical node
    (-1: none, a job-wide failure), `class`, `scope` and `repair_hours` (NaN: not given)."""

    source: str
    events: pd.DataFrame
    window_hours: float
    nodes: int  # nodes exposed for the whole window (the rate's denominator)
    gpus_per_node: int
    warnings: tuple[str, ...] = ()

    @property
    def gpu_days(self) -> float:
        return self.nodes * self.gpus_per_node * self.window_hours / HOURS_PER_DAY


def read_log(
    path: str | Path,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    start: str | float | None = None,
    end: str | float | None = None,
    replica: int | None = None,
    point: int | None = None,
) -> IncidentLog:
    """Read and check an incident log (CSV or parquet). `start`/`end` bound the window: hours
    since its start for a log in hours, ISO 8601 for one in dates (then `start` is needed).
    A trainsim log (`incidents.parquet` of a run) is read for one `replica` and `point`, its
    window and nodes taken from the run directory beside it unless given: only a log with
    trainsim's replica/point columns, with the run's run.json beside it, is read as a run's
    (a user's own log never takes a scenario.yaml that happens to lie next to it)."""
    frame = _read_table(Path(path))
    return log_from_table(
        frame, str(path), nodes, gpus_per_node, start, end, replica, point,
        _run_dir_of(Path(path), frame),
    )  # fmt: skip


RUN_MANIFEST = "run.json"  # a run directory's manifest (sim/runs/results.py)


def _run_dir_of(path: Path, frame: pd.DataFrame) -> Path | None:
    """The run directory a trainsim log lies in, else None."""
    if not {"replica", "point"} & set(frame.columns):
        return None
    return path.parent if (path.parent / RUN_MANIFEST).is_file() else None


def log_from_table(
    frame: pd.DataFrame,
    source: str = "<log>",
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    start: str | float | None = None,
    end: str | float | None = None,
    replica: int | None = None,
    point: int | None = None,
    run_dir: Path | None = None,
) -> IncidentLog:
    """`read_log` of a table already in memory (e.g. a run's incidents.parquet, read)."""
    # a header written `time, node` (spaces after the commas) names the same columns
    frame = frame.rename(columns=lambda c: c.strip() if isinstance(c, str) else c)
    unknown = [c for c in frame.columns if c not in REQUIRED + OPTIONAL]
    if unknown:
        raise ScenarioError(
            source,
            f"column {unknown[0]}",
            f"unknown column {unknown[0]!r}; expected time, node and optionally "
            f"{', '.join(OPTIONAL[:3])} (trainsim's own logs add {', '.join(OPTIONAL[3:])})",
        )
    for column in REQUIRED:
        if column not in frame.columns:
            raise ScenarioError(
                source,
                f"column {column}",
                f"missing column {column!r}: a log needs time (ISO 8601 or hours since the "
                "window's start) and node, one row per failure",
            )
    frame, run_defaults = _select_run(source, run_dir, frame, replica, point)
    nodes = nodes if nodes is not None else run_defaults.get("nodes")
    gpus_per_node = gpus_per_node if gpus_per_node is not None else run_defaults.get("gpus", 8)
    if nodes is None:
        raise ScenarioError(source, "--nodes", "give --nodes N: the nodes the log covers")
    if end is None:
        end = run_defaults.get("end")
    warnings: list[str] = []

    times, start_h, end_h = _times(source, frame["time"], start, end)
    if end_h is None:
        end_h = float(np.max(times)) if len(times) else 0.0
        warnings.append(
            "no --end: the window ends at the last failure, which overstates the rates a "
            "little; give --end"
        )
    window = end_h - start_h
    if not window > 0:
        raise ScenarioError(source, "--end", f"the window is empty (end {end} <= start {start})")
    times = times - start_h
    outside = np.flatnonzero((times < 0) | (times > window))
    if len(outside):
        row = int(outside[0])
        raise ScenarioError(
            source,
            f"row {row + 1}, column time",
            f"time {_plain(frame['time'].iloc[row])} lies outside the window "
            f"[{_show(start, 0)}, {_show(end, end_h)}]; widen --start/--end or drop the row",
        )
    node = _nodes(source, frame["node"])
    names = _classes(source, frame)
    scope = _scopes(source, frame, names, node)
    nameless = np.flatnonzero(np.isin(scope, NODE_SCOPES) & (node < 0))
    if len(nameless):
        row = int(nameless[0])
        raise ScenarioError(
            source,
            f"row {row + 1}, column node",
            f"a {scope[row]} failure names no node: give the node it struck, or scope job "
            "for a failure of no one node",
        )
    repair = _repairs(source, frame)
    zero = int(np.count_nonzero(repair == 0))
    if zero:
        warnings.append(
            f"{zero} repair times of 0 hours (a node back at once): kept in the mean repair "
            "time written, left out of the lognormal's fit"
        )
    events = pd.DataFrame(
        {"time_h": times, "node": node, "class": names, "scope": scope, "repair_hours": repair}
    )
    seen = len(np.unique(node[node >= 0]))
    if seen > nodes:
        warnings.append(
            f"the log names {seen} nodes, more than --nodes {nodes} (spares that swapped "
            "in?): rates use --nodes, the per-node counts every named node"
        )
    events = events.sort_values("time_h", kind="stable").reset_index(drop=True)
    return IncidentLog(source, events, window, int(nodes), int(gpus_per_node), tuple(warnings))


def _read_table(path: Path) -> pd.DataFrame:
    source = str(path)
    if not path.is_file():
        raise ScenarioError(source, "", "no such file: expected an incident log (CSV or parquet)")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            return pd.read_parquet(path)
        # only an empty cell is missing: a host named NA, None or null is a name
        return pd.read_csv(
            path,
            dtype={"time": str, "node": str, "class": str, "scope": str},
            keep_default_na=False,
            na_values={"repair_hours": [""], "time": [""], "node": [""], "class": [""],
                       "scope": [""], "replica": [""], "point": [""]},
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - any reader failure is bad input
        raise ScenarioError(
            source, "", f"cannot read the log ({type(exc).__name__}: {exc}); expected CSV "
            "with a header row, or parquet",
        ) from None  # fmt: skip


def _select_run(
    source: str, run_dir: Path | None, frame: pd.DataFrame, replica: int | None, point: int | None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The rows of one replica (and point) of a trainsim log, and what its run directory
    says: the replica's wall time (the window) and the job's nodes and GPUs per node."""
    defaults: dict[str, Any] = {}
    for column, wanted, flag in (("point", point, "--point"), ("replica", replica, "--replica")):
        if column not in frame.columns:
            if wanted is not None:
                raise ScenarioError(source, flag, f"the log has no {column} column")
            continue
        raw = frame[column]
        whole = pd.to_numeric(raw, errors="coerce")
        wrong = raw.notna() & ~((whole >= 0) & (whole % 1 == 0))
        if wrong.any() or raw.map(lambda v: isinstance(v, bool)).any():
            row = int(
                np.flatnonzero((wrong | raw.map(lambda v: isinstance(v, bool))).to_numpy())[0]
            )
            raise ScenarioError(
                source, f"row {row + 1}, column {column}",
                f"{_plain(raw.iloc[row])}: trainsim's {column} column holds whole numbers >= 0",
            )  # fmt: skip
        values = sorted(pd.unique(frame[column].dropna()))
        if wanted is None:
            if len(values) > 1:
                raise ScenarioError(
                    source, flag, f"the log holds {len(values)} {column}s "
                    f"({values[0]}..{values[-1]}): pick one with {flag}",
                )  # fmt: skip
            wanted = int(values[0]) if values else 0
        frame = frame[frame[column] == wanted]
        defaults[column] = int(wanted)
    drop = ("replica", "point", "lasting_fault", "repair_path")
    frame = frame[[c for c in frame.columns if c not in drop]].reset_index(drop=True)
    if run_dir is None:
        return frame, defaults
    table = run_dir / "replicas.parquet"
    if "replica" in defaults and table.is_file():
        try:
            rows = pd.read_parquet(table, columns=["point", "replica", "wall_hours"])
        except Exception as exc:  # noqa: BLE001 - truncated, not parquet, other columns
            raise ScenarioError(
                str(table), "", f"cannot read the run's replica table ({type(exc).__name__}: "
                f"{str(exc)[:200]}), which gives the window of {source}; give --end (the "
                "replica's wall hours) and --nodes, or fit a copy of the log kept elsewhere",
            ) from None  # fmt: skip
        rows = rows[
            (rows["replica"] == defaults["replica"]) & (rows["point"] == defaults.get("point", 0))
        ]
        if len(rows):
            defaults["end"] = float(rows["wall_hours"].iloc[0])
    scenario = run_dir / "scenario.yaml"
    if scenario.is_file():
        defaults.update(_run_cluster(scenario, source))
    return frame, defaults


def _run_cluster(scenario: Path, source: str) -> dict[str, int]:
    """A run's nodes and GPUs per node from its scenario.yaml (none if it gives no number)."""
    import yaml

    def bad(what: str) -> ScenarioError:
        return ScenarioError(
            str(scenario), "cluster", f"{what}; the run's scenario gives the nodes of "
            f"{source}: expected a mapping with cluster.nodes (give --nodes and "
            "--gpus-per-node instead)",
        )  # fmt: skip

    try:
        doc = yaml.safe_load(scenario.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise bad(f"cannot read it ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cluster", {}), dict):
        raise bad(f"not a scenario (a {type(doc).__name__} at its top)")
    cluster = doc.get("cluster") or {}
    found = {}
    for key, name in (("nodes", "nodes"), ("gpus_per_node", "gpus")):
        value = cluster.get(key, 8)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return {}  # none given, or not one number: --nodes is asked for
        found[name] = value
    return found


def _show(given: Any, hours: float) -> str:
    return str(given) if given is not None else f"{hours:g} h"


def _times(
    source: str, column: pd.Series, start: Any, end: Any
) -> tuple[np.ndarray, float, float | None]:
    """Times in hours, and the window's start and end in the same hours. A column of
    timestamps (parquet's datetime type) is read as times, never as numbers."""
    if pd.api.types.is_bool_dtype(column) or column.map(lambda v: isinstance(v, bool)).any():
        _bad_time(
            source, column, column.map(lambda v: isinstance(v, bool | np.bool_)),
            "is a boolean, not a time: give hours since the window's start or ISO 8601",
        )  # fmt: skip
    if pd.api.types.is_datetime64_any_dtype(column):
        column = column.dt.strftime("%Y-%m-%dT%H:%M:%S.%f%z").where(column.notna())
        if column.isna().any():
            _bad_time(source, column, column.isna(), "is empty: every failure needs its time")
    numeric = pd.to_numeric(column, errors="coerce")
    if len(column) == 0 or numeric.notna().all():
        times = numeric.to_numpy(dtype=float)
        if not np.isfinite(times).all():
            _bad_time(source, column, pd.Series(~np.isfinite(times)), "is not a finite time")
        return times, _hours(source, "--start", start, 0.0), _hours(source, "--end", end, None)
    if numeric.notna().any():
        _bad_time(
            source,
            column,
            numeric.isna(),
            "is not a number of hours like the rows before it; give every time in hours "
            "since the window's start, or every one as ISO 8601",
        )
    stamps = pd.to_datetime(column, utc=True, errors="coerce", format="ISO8601")
    if stamps.isna().any():
        _bad_time(
            source, column, stamps.isna(), "is neither hours nor an ISO 8601 time "
            "(e.g. 2026-03-01T14:05:00Z)",
        )  # fmt: skip
    if start is None:
        raise ScenarioError(
            source, "--start", "the log's times are dates: give the window's --start "
            "(ISO 8601; the first failure is not the window's start)",
        )  # fmt: skip
    origin = _stamp(source, "--start", start)
    hours = ((stamps - origin).dt.total_seconds() / 3600.0).to_numpy(dtype=float)
    end_h = None if end is None else (_stamp(source, "--end", end) - origin).total_seconds() / 3600
    return hours, 0.0, end_h


def _bad_time(source: str, column: pd.Series, bad: pd.Series, problem: str) -> NoReturn:
    """Refuse the log at its first time that is `bad`, naming its row."""
    row = int(np.flatnonzero(bad.to_numpy())[0])
    raise ScenarioError(
        source, f"row {row + 1}, column time", f"{_plain(column.iloc[row])} {problem}"
    )


def _hours(source: str, flag: str, value: Any, default: float | None) -> float | None:
    if value is None:
        return default
    try:
        hours = float(value)
    except (TypeError, ValueError):
        raise ScenarioError(
            source, flag, f"{_plain(value)}: the log's times are hours, so {flag} is hours too"
        ) from None
    if not math.isfinite(hours):
        raise ScenarioError(source, flag, f"{_plain(value)}: expected a finite number of hours")
    return hours


def _stamp(source: str, flag: str, value: Any) -> pd.Timestamp:
    try:
        return (
            pd.Timestamp(value).tz_localize("UTC")
            if pd.Timestamp(value).tzinfo is None
            else pd.Timestamp(value).tz_convert("UTC")
        )
    except (TypeError, ValueError):
        raise ScenarioError(
            source, flag, f"{_plain(value)}: the log's times are ISO 8601, so {flag} is one too"
        ) from None


def _nodes(source: str, column: pd.Series) -> np.ndarray:
    """Node ids as integers: numbers stay, names (hostnames, and numbers too long for 64
    bits) get codes; empty or -1: none. A cell holding a list or a boolean is refused."""
    odd = column.map(lambda v: isinstance(v, list | tuple | dict | set | np.ndarray | bool))
    if odd.any():
        row = int(np.flatnonzero(odd.to_numpy())[0])
        raise ScenarioError(
            source, f"row {row + 1}, column node",
            f"{_plain(column.iloc[row])}: a node is one whole number >= 0, a name, or empty",
        )  # fmt: skip
    column = column.map(lambda v: str(v) if isinstance(v, int) and abs(v) >= 2**62 else v)
    numeric = pd.to_numeric(column, errors="coerce")
    text = column.astype("string").str.strip()
    empty = column.isna() | (text == "") | (numeric == -1)
    if (numeric[~empty].abs() >= 2**62).any():  # too long for an id: a name
        numeric = numeric.where(numeric.abs() < 2**62)
    if numeric[~empty].notna().all():
        if (numeric[~empty] < 0).any() or (numeric[~empty] % 1 != 0).any():
            row = int(np.flatnonzero(((numeric < 0) | (numeric % 1 != 0)) & ~empty)[0])
            raise ScenarioError(
                source,
                f"row {row + 1}, column node",
                f"{_plain(column.iloc[row])}: a node is a whole number >= 0, a name, or empty "
                "(a failure of no one node)",
            )
        return np.where(empty, -1, numeric.fillna(-1)).astype(np.int64)
    codes, _ = pd.factorize(text.where(~empty))
    return np.where(empty, -1, codes).astype(np.int64)


def _classes(source: str, frame: pd.DataFrame) -> np.ndarray:
    if "class" not in frame.columns:
        return np.full(len(frame), DEFAULT_CLASS, dtype=object)
    names = []
    for row, value in enumerate(frame["class"].tolist()):
        if value is None or (isinstance(value, float) and math.isnan(value)) or not str(value):
            raise ScenarioError(
                source, f"row {row + 1}, column class", "empty class: name every row's class "
                "(or drop the column: one class)",
            )  # fmt: skip
        name = re.sub(r"[^a-z0-9_]+", "_", str(value).strip().lower()).strip("_")[:64]
        if not name or name == "lemon":
            raise ScenarioError(
                source, f"row {row + 1}, column class",
                f"{value!r} cannot name a failure class (letters, digits, _; not 'lemon')",
            )  # fmt: skip
        names.append(name)
    return np.array(names, dtype=object)


def _scopes(source: str, frame: pd.DataFrame, names: np.ndarray, node: np.ndarray) -> np.ndarray:
    """A scope per row: the column's, else node for a failure of a node, job for none."""
    if "scope" not in frame.columns:
        return np.where(node >= 0, "node", "job").astype(object)
    scope = frame["scope"].astype("string").str.strip().str.lower()
    for row, value in enumerate(scope.tolist()):
        if value is pd.NA or value not in SCOPES:
            raise ScenarioError(
                source, f"row {row + 1}, column scope",
                f"{_plain(frame['scope'].iloc[row])}; expected one of {', '.join(SCOPES)}",
            )  # fmt: skip
    return scope.to_numpy(dtype=object)


def _plain(value: Any) -> str:
    """A value from the log as a person wrote it: numbers as numbers (not np.float64(...)),
    text quoted."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value) if isinstance(value, str) else str(value)


def _repairs(source: str, frame: pd.DataFrame) -> np.ndarray:
    if "repair_hours" not in frame.columns:
        return np.full(len(frame), np.nan)
    raw = frame["repair_hours"]
    hours = pd.to_numeric(raw, errors="coerce")
    bad = (raw.notna() & hours.isna()) | (hours < 0) | (hours > MAX_HOURS)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ScenarioError(
            source,
            f"row {row + 1}, column repair_hours",
            f"{_plain(raw.iloc[row])}: expected hours from 0 to {MAX_HOURS:,.0f}, or empty "
            "(no repair)",
        )
    return hours.to_numpy(dtype=float)


# --------------------------------------------------------------------------- estimates


@dataclass(frozen=True)
class Estimate:
    """A fitted number, its 95% interval and the events behind it."""

    value: float
    low: float
    high: float
    events: int

    def covers(self, truth: float) -> bool:
        return self.low <= truth <= self.high

    def doc(self) -> dict[str, float | int]:
        return {"value": self.value, "low": self.low, "high": self.high, "events": self.events}


def poisson_rate(events: int, exposure: float, level: float = LEVEL) -> Estimate:
    """Events per unit of exposure with the exact (Garwood) interval:
    [χ²(α/2; 2k)/2, χ²(1−α/2; 2k+2)/2] / exposure."""
    alpha = 1.0 - level
    low = stats.chi2.ppf(alpha / 2, 2 * events) / 2 if events > 0 else 0.0
    high = stats.chi2.ppf(1 - alpha / 2, 2 * events + 2) / 2
    return Estimate(events / exposure, float(low) / exposure, float(high) / exposure, events)


@dataclass(frozen=True)
class Lives:
    """A class's lives in the window (hours), each component (a node; the job for a class
    without nodes) a renewal process long in service: `first` runs from the window's start
    to the component's first failure (a residual life: the component was already running),
    `first_cut` is the whole window of a component that never failed (a residual life,
    censored), `whole` runs between two failures, `whole_cut` from the last failure to the
    window's end (censored). Failures of one component at one time are merged (`ties`)."""

    whole: np.ndarray
    whole_cut: np.ndarray
    first: np.ndarray
    first_cut: np.ndarray
    ties: int = 0

    @property
    def observed(self) -> np.ndarray:
        return np.concatenate((self.first, self.whole))

    @functools.cached_property
    def log_times(self) -> np.ndarray:
        """log x of every life but the cut residual ones (they enter through Q)."""
        times = np.concatenate((self.whole, self.whole_cut, self.first))
        return np.log(times[times > 0])

    @functools.cached_property
    def sum_log_whole(self) -> float:
        return float(np.sum(np.log(np.maximum(self.whole, 1e-300))))

    @functools.cached_property
    def log_first_cut(self) -> np.ndarray:
        return np.log(self.first_cut)

    @property
    def censored(self) -> np.ndarray:
        return np.concatenate((self.whole_cut, self.first_cut))


def renewal_rate(events: int, exposure: float, shape: float, level: float = LEVEL) -> Estimate:
    """The rate of a class whose components are Weibull renewal processes of shape k: over a
    long window their counts vary φ = CV² = Γ(1+2/k)/Γ(1+1/k)² − 1 times as much as
    Poisson counts (Cox 1962), so the exact interval is taken on k/φ effective events over
    exposure/φ (a quasi-Poisson interval: the estimate is unchanged, the interval wider for
    k < 1). Never narrower than the Poisson interval (φ ≥ 1): a shape above 1 chosen by
    chance would otherwise narrow it."""
    phi = max(1.0, math.gamma(1 + 2 / shape) / math.gamma(1 + 1 / shape) ** 2 - 1)
    scaled = poisson_rate(events / phi, exposure / phi, level)  # type: ignore[arg-type]
    return Estimate(scaled.value, scaled.low, scaled.high, events)


def renewal_lives(
    times: np.ndarray,
    nodes: np.ndarray,
    window: float,
    total_nodes: int,
    pace: np.ndarray | None = None,
    unseen_pace: float = 1.0,
) -> Lives:
    """Each component's lives in the window (`Lives`), sorted and split in one pass (no
    per-node loop: a log of a million nodes takes seconds). Job-wide failures (node -1) are
    one renewal process; `total_nodes` beyond the nodes named never failed. With `pace`
    (per failure, its node's rate over a sound node's), each node's times are stretched by
    its pace, so a lemon's lives read as a sound node's (`unseen_pace`: the nodes that never
    failed)."""
    order = np.lexsort((times, nodes))
    times, nodes = times[order].astype(float), nodes[order]
    stretch = np.ones(len(times)) if pace is None else np.asarray(pace, dtype=float)[order]
    same = nodes[1:] == nodes[:-1]
    tie = same & (np.diff(times) <= 0)
    keep = np.concatenate(([True], ~tie))  # a tie merges into the failure before it
    times, nodes, stretch = times[keep] * stretch[keep], nodes[keep], stretch[keep]
    first = np.concatenate(([True], nodes[1:] != nodes[:-1]))[: len(nodes)]
    last = np.concatenate((nodes[1:] != nodes[:-1], [True]))[: len(nodes)]
    unseen = max(0, total_nodes - int(np.count_nonzero(first & (nodes >= 0))))
    if len(nodes) and (nodes < 0).all():
        unseen = 0  # a job-wide class has no per-node clocks
    return Lives(
        whole=np.diff(times)[~first[1:]],
        whole_cut=np.maximum(window * stretch[last] - times[last], 0.0),
        first=times[first],
        first_cut=np.full(unseen, float(window) * unseen_pace),
        ties=int(np.count_nonzero(tie)),
    )


@dataclass(frozen=True)
class LifetimeFit:
    """Exponential against Weibull on censored times between failures (hours)."""

    loglik_exponential: float
    loglik_weibull: float
    aic_exponential: float
    aic_weibull: float
    mean_hours: float  # the exponential's mean time between failures of one node
    shape: Estimate  # the Weibull shape with its profile-likelihood interval
    scale_hours: float
    chosen: str  # exponential | weibull

    def doc(self) -> dict[str, Any]:
        return {
            "loglik_exponential": self.loglik_exponential,
            "loglik_weibull": self.loglik_weibull,
            "aic_exponential": self.aic_exponential,
            "aic_weibull": self.aic_weibull,
            "weibull_shape": self.shape.doc(),
            "weibull_scale_hours": self.scale_hours,
            "chosen": self.chosen,
        }


def _weibull_profile(k: float, lives: Lives) -> tuple[float, float]:
    """The Weibull log-likelihood of components long in service, maximised over the scale
    at shape k; returns (log-likelihood, scale). Whole lives count f(x), cut ones S(x),
    residual lives from the window's start S(y)/mean (the renewal process's equilibrium),
    and cut residual lives Q(1/k, (w/scale)^k) (the equilibrium's survival, Q the
    regularized upper incomplete gamma function). Without cut residual lives the scale has
    a closed form, s^k = k·A / (k·n + m) with A = Σx^k over the other lives, n whole lives
    and m residual ones; with them it starts there and is maximised numerically."""
    n, m = len(lives.whole), len(lives.first)
    logs = lives.log_times
    top = float(np.max(logs))
    log_a = top * k + math.log(float(np.sum(np.exp(k * (logs - top)))))  # log Σ x^k
    log_gamma = math.lgamma(1.0 + 1.0 / k)

    def loglik(log_s: float) -> float:
        total = (
            n * math.log(k)
            + (k - 1) * lives.sum_log_whole
            - (n * k + m) * log_s
            - math.exp(log_a - k * log_s)
            - m * log_gamma
        )
        if len(lives.first_cut):
            z = np.exp(k * (lives.log_first_cut - log_s))
            a = 1.0 / k
            survival = special.gammaincc(a, z)
            # far in the tail Q underflows: its asymptote (a - 1)·log z - z - logΓ(a)
            tail = (a - 1) * np.log(np.maximum(z, 1e-300)) - z - special.gammaln(a)
            safe = np.log(np.maximum(survival, 1e-300))
            total += float(np.sum(np.where(survival > 1e-280, safe, tail)))
        return total

    log_s = (math.log(k) + log_a - math.log(n * k + m)) / k if n * k + m > 0 else top
    if len(lives.first_cut):
        best = optimize.minimize_scalar(
            lambda v: -loglik(v),
            bounds=(log_s - 2.0, log_s + 2.0),
            method="bounded",
            options={"xatol": 1e-7},
        )
        log_s = float(best.x)
    return loglik(log_s), math.exp(log_s)


def fit_lifetime(lives: Lives, level: float = LEVEL) -> LifetimeFit:
    """Maximum likelihood with censoring, components long in service (`_weibull_profile`):
    the exponential (rate d/Σx over every life, whole, residual and cut) against the
    Weibull, whose scale is profiled (maximised for each shape) and whose shape maximises
    the profile; the shape's interval is where the profile is within χ²₁(level)/2 of the
    maximum. The Weibull is chosen when its AIC is lower and the shape's interval excludes
    1. The exponential is the Weibull of shape 1 (memoryless: residual lives are whole)."""
    d = len(lives.whole) + len(lives.first)
    exposure = float(
        np.sum(lives.whole) + np.sum(lives.whole_cut) + np.sum(lives.first)
        + np.sum(lives.first_cut)
    )  # fmt: skip
    mean = exposure / d
    loglik_exp = d * math.log(d / exposure) - d

    def profile(log_k: float) -> float:
        return _weibull_profile(math.exp(log_k), lives)[0]

    best = optimize.minimize_scalar(
        lambda v: -profile(v),
        bounds=(math.log(0.02), math.log(50.0)),
        method="bounded",
        options={"xatol": 1e-5},
    )
    log_k, loglik_w = float(best.x), -float(best.fun)
    scale = _weibull_profile(math.exp(log_k), lives)[1]
    if loglik_exp > loglik_w:  # the exponential is the Weibull of shape 1
        log_k, loglik_w, scale = 0.0, loglik_exp, mean
    cut = loglik_w - stats.chi2.ppf(level, 1) / 2

    def edge(bound: float) -> float:
        if profile(bound) >= cut:
            return bound
        low, high = (bound, log_k) if bound < log_k else (log_k, bound)
        return optimize.brentq(lambda v: profile(v) - cut, low, high, xtol=1e-5)

    low, high = math.exp(edge(math.log(0.02))), math.exp(edge(math.log(50.0)))
    k = math.exp(log_k)
    aic_exp, aic_w = 2 - 2 * loglik_exp, 4 - 2 * loglik_w
    chosen = "weibull" if aic_w < aic_exp and not low <= 1.0 <= high else "exponential"
    return LifetimeFit(
        loglik_exp, loglik_w, aic_exp, aic_w, mean, Estimate(k, low, high, d), scale, chosen,
    )  # fmt: skip


@dataclass(frozen=True)
class RepairFit:
    """Repair times (hours): exponential against lognormal by AIC; the chosen law's mean."""

    repairs: int
    mean: Estimate  # the chosen law's mean, with its interval
    sample_mean_hours: float
    lognormal_mu: float
    lognormal_sigma: float
    aic_exponential: float
    aic_lognormal: float
    chosen: str

    def doc(self) -> dict[str, Any]:
        return {
            "repairs": self.repairs,
            "mean_hours": self.mean.doc(),
            "sample_mean_hours": self.sample_mean_hours,
            "lognormal_mu": self.lognormal_mu,
            "lognormal_sigma": self.lognormal_sigma,
            "aic_exponential": self.aic_exponential,
            "aic_lognormal": self.aic_lognormal,
            "chosen": self.chosen,
        }


def fit_repairs(hours: np.ndarray, level: float = LEVEL) -> RepairFit:
    """Exponential: mean = x̄, interval from 2n·x̄/χ²(2n). Lognormal: μ, σ the mean and
    (n-divisor) standard deviation of log x, mean exp(μ + σ²/2) with Cox's interval
    μ + σ²/2 ± z·sqrt(σ²/n + σ⁴/(2(n−1))). Both laws are fitted on the times above 0 (a
    repair logged as 0 hours has no logarithm); the sample mean counts every time."""
    sample_mean = float(np.mean(hours))
    hours = hours[hours > 0]
    n = len(hours)
    alpha = 1 - level
    mean = float(np.mean(hours))
    logs = np.log(hours)
    mu, sigma = float(np.mean(logs)), float(np.std(logs))
    loglik_exp = -n * math.log(mean) - n
    sigma_safe = max(sigma, 1e-12)
    loglik_ln = float(np.sum(stats.norm.logpdf(logs, mu, sigma_safe) - logs))
    aic_exp, aic_ln = 2 - 2 * loglik_exp, 4 - 2 * loglik_ln
    if aic_ln < aic_exp:
        z = stats.norm.ppf(1 - alpha / 2)
        centre = mu + sigma**2 / 2
        half = z * math.sqrt(sigma**2 / n + sigma**4 / (2 * max(n - 1, 1)))
        estimate = Estimate(math.exp(centre), math.exp(centre - half), math.exp(centre + half), n)
        chosen = "lognormal"
    else:
        estimate = Estimate(
            mean,
            2 * n * mean / stats.chi2.ppf(1 - alpha / 2, 2 * n),
            2 * n * mean / stats.chi2.ppf(alpha / 2, 2 * n),
            n,
        )
        chosen = "exponential"
    return RepairFit(n, estimate, sample_mean, mu, sigma, aic_exp, aic_ln, chosen)


@dataclass(frozen=True)
class Mixture:
    """Two Poisson rates per node (per window): a share `fraction` of lemons at `lemon`,
    the rest at `normal`."""

    fraction: float
    normal: float
    lemon: float
    loglik: float

    @property
    def multiplier(self) -> float:
        return self.lemon / self.normal if self.normal > 0 else math.inf

    def node_multiplier(self, counts: np.ndarray) -> np.ndarray:
        """A node's expected rate over a sound node's, given its count: 1 + p·(m − 1), p its
        posterior probability of being a lemon."""
        counts = np.asarray(counts, dtype=float)
        log_sound = math.log1p(-self.fraction) + counts * math.log(self.normal) - self.normal
        log_lemon = math.log(self.fraction) + counts * math.log(self.lemon) - self.lemon
        lemon = 1.0 / (1.0 + np.exp(np.clip(log_sound - log_lemon, -700, 700)))
        return 1.0 + lemon * (min(self.multiplier, 1000.0) - 1.0)


def _em(
    counts: np.ndarray, pi: np.ndarray, lam1: np.ndarray, lam2: np.ndarray, iterations: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """EM for two Poisson components on each row of `counts` (rows: starts, or bootstrap
    resamples) at once; returns (fraction, rate 1, rate 2, log-likelihood) per row. Counts
    are whole numbers: each row is held as how many nodes have each count (a few dozen
    values, whatever the nodes)."""
    rows = counts.astype(np.int64)
    values = np.arange(int(rows.max()) + 1 if rows.size else 1, dtype=float)
    weights = np.stack([np.bincount(row, minlength=len(values)) for row in rows]).astype(float)
    nodes = weights.sum(axis=1)
    log_factorial = special.gammaln(values + 1)
    previous = np.full(len(rows), -np.inf)
    loglik = previous
    for _ in range(iterations):
        log1 = np.log1p(-pi)[:, None] + values * np.log(lam1)[:, None] - lam1[:, None]
        log2 = np.log(pi)[:, None] + values * np.log(lam2)[:, None] - lam2[:, None]
        top = np.maximum(log1, log2)
        total = top + np.log(np.exp(log1 - top) + np.exp(log2 - top))
        loglik = np.sum(weights * (total - log_factorial), axis=1)
        lemon = weights * np.exp(log2 - total)  # nodes of each count in the lemon component
        sound = weights - lemon
        pi = np.clip(lemon.sum(axis=1) / nodes, 1e-6, 1 - 1e-6)
        lam1 = np.maximum((sound @ values) / np.maximum(sound.sum(axis=1), 1e-300), 1e-9)
        lam2 = np.maximum((lemon @ values) / np.maximum(lemon.sum(axis=1), 1e-300), 1e-9)
        if np.all(loglik - previous < 1e-6):
            break
        previous = loglik
    swap = lam2 < lam1  # the lemons are the faster component
    pi = np.where(swap, 1 - pi, pi)
    lam1, lam2 = np.where(swap, lam2, lam1), np.where(swap, lam1, lam2)
    return pi, lam1, lam2, loglik


def poisson_mixture(counts: np.ndarray, iterations: int = 2000) -> Mixture:
    """Two-component Poisson mixture by EM from three starts; the best likelihood wins."""
    counts = np.asarray(counts, dtype=float)
    mean = max(float(np.mean(counts)), 1e-9)
    high = max(mean * 3.0, float(np.quantile(counts, 0.9)), 1e-6)
    pi = np.array([0.1, 0.05, 0.25])
    lam1 = mean * np.array([0.7, 0.9, 0.5])
    lam2 = np.array([high, mean * 5.0, mean * 2.0])
    pi, lam1, lam2, loglik = _em(
        np.tile(counts, (3, 1)), pi, np.maximum(lam1, 1e-9), lam2, iterations
    )
    best = int(np.argmax(loglik))
    return Mixture(float(pi[best]), float(lam1[best]), float(lam2[best]), float(loglik[best]))


@dataclass(frozen=True)
class LemonFit:
    """Per-node failure counts (node-attributable classes) against Poisson."""

    nodes: int
    events: int
    dispersion: float  # Σ (n_i − n̄)² / n̄
    p_value: float  # of χ²(nodes − 1)
    overdispersed: bool
    fraction: Estimate | None = None
    multiplier: Estimate | None = None
    mixture: Mixture | None = None
    counts: np.ndarray = field(default_factory=lambda: np.array([]))
    # what the statistic is held against: χ²(N − 1) (equal Poisson rates), or draws of the
    # classes' own laws with no spread between nodes
    null: str = "poisson"
    # the spread chosen when overdispersed, by AIC on the counts: two-point lemons (3
    # parameters) or a gamma spread of the nodes' rates (negative binomial counts, 2)
    spread: str = "none"  # none | lemons | gamma
    node_cv: Estimate | None = None  # the gamma spread's coefficient of variation
    aic_lemons: float = math.nan
    aic_gamma: float = math.nan

    @property
    def has_lemons(self) -> bool:
        return self.spread == "lemons"

    def pace(self, counts: np.ndarray) -> np.ndarray:
        """A node's expected rate over the rate the scenario writes for its classes (a sound
        node's with lemons, the mean node's with a gamma spread), given its count."""
        counts = np.asarray(counts, dtype=float)
        if self.spread == "lemons":
            return self.mixture.node_multiplier(counts)
        if self.spread == "gamma":
            shape, mean = 1.0 / self.node_cv.value**2, float(np.mean(self.counts))
            return (shape + counts) / (shape + mean)  # the gamma posterior's mean
        return np.ones_like(counts)

    @property
    def test(self) -> str:
        if self.null == "poisson":
            return f"chi2, {self.nodes - 1} dof"
        return "draws of the laws, nodes alike"

    def doc(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "events": self.events,
            "dispersion_statistic": self.dispersion,
            "degrees_of_freedom": self.nodes - 1,
            "null": self.null,
            "p_value": self.p_value,
            "overdispersed": self.overdispersed,
            "spread": self.spread,
            "aic_lemons": self.aic_lemons,
            "aic_gamma": self.aic_gamma,
            "node_rate_cv": None if self.node_cv is None else self.node_cv.doc(),
            "lemon_fraction": None if self.fraction is None else self.fraction.doc(),
            "lemon_rate_multiplier": None if self.multiplier is None else self.multiplier.doc(),
        }


def dispersion(counts: np.ndarray) -> np.ndarray:
    """D = Σ (n_i − n̄)²/n̄ over the last axis (0 where no node failed)."""
    mean = np.mean(counts, axis=-1)
    spread = np.sum((counts - mean[..., None]) ** 2, axis=-1)
    return np.where(mean > 0, spread / np.where(mean > 0, mean, 1.0), 0.0)


def renewal_counts(
    laws: list[tuple[float, float]], nodes: int, window: float, rng: np.random.Generator
) -> np.ndarray:
    """`BOOTSTRAP` draws of every node's failures in the window (summed over the classes)
    when all nodes are alike: each class a Weibull renewal process (shape, scale in hours)
    long in service, its first failure after an equilibrium residual life. Fewer draws for a
    fleet of more than 100,000 nodes (at most 2·10⁷ node-draws: the statistic of so many
    nodes barely varies between draws)."""
    total = np.zeros((max(20, min(BOOTSTRAP, 20_000_000 // max(nodes, 1))), nodes))
    for shape, scale in laws:
        if shape == 1.0:  # exponential: Poisson counts
            total += rng.poisson(window / scale, size=total.shape)
            continue
        biased = scale * rng.gamma(1.0 + 1.0 / shape, 1.0, total.shape) ** (1.0 / shape)
        t = rng.random(total.shape) * biased
        while (alive := t <= window).any():
            total += alive
            t = np.where(alive, t + scale * rng.weibull(shape, total.shape), t)
    return total


def fit_lemons(
    counts: np.ndarray,
    rng: np.random.Generator,
    level: float = LEVEL,
    null: np.ndarray | None = None,
) -> LemonFit:
    """The dispersion test of D = Σ (n_i − n̄)²/n̄: against χ²(N−1) when every class is
    exponential (equal Poisson rates), or against `null`, the same statistic of counts drawn
    with the classes' own lifetime laws and no spread between nodes (`renewal_counts`: a
    decreasing hazard alone spreads the counts, which is not lemons). When p < 0.05, a
    two-component mixture by EM, with percentile intervals from `BOOTSTRAP` resamples of
    the nodes."""
    counts = np.asarray(counts, dtype=float)
    n = len(counts)
    statistic = float(dispersion(counts))
    if null is None:
        p_value = float(stats.chi2.sf(statistic, n - 1))
    else:
        p_value = float((1 + np.count_nonzero(null >= statistic)) / (1 + len(null)))
    events = int(counts.sum())
    null_law = "poisson" if null is None else "renewal"
    if p_value >= DISPERSION_ALPHA:
        return LemonFit(n, events, statistic, p_value, False, counts=counts, null=null_law)
    mixture = poisson_mixture(counts)
    # every resample starts from the fit to the data, so its components keep their labels
    resamples = rng.choice(counts, size=(BOOTSTRAP, n), replace=True)
    ones = np.ones(BOOTSTRAP)
    fractions, normal, lemon, _ = _em(
        resamples, mixture.fraction * ones, mixture.normal * ones, mixture.lemon * ones, 500
    )
    multipliers = np.minimum(lemon / np.maximum(normal, 1e-9), 1000.0)
    alpha = 1 - level
    q = (alpha / 2, 1 - alpha / 2)
    fraction = Estimate(mixture.fraction, *np.quantile(fractions, q).tolist(), events)
    multiplier = Estimate(
        min(mixture.multiplier, 1000.0), *np.quantile(multipliers, q).tolist(), events
    )
    gamma = gamma_spread(counts, level)
    aic_lemons = 6 - 2 * mixture.loglik
    aic_gamma = 4 - 2 * gamma[1]
    return LemonFit(
        n, events, statistic, p_value, True, fraction, multiplier, mixture, counts, null_law,
        "lemons" if aic_lemons <= aic_gamma else "gamma", gamma[0], aic_lemons, aic_gamma,
    )  # fmt: skip


def gamma_spread(counts: np.ndarray, level: float = LEVEL) -> tuple[Estimate, float]:
    """Nodes whose rates are gamma-distributed (mean 1, coefficient of variation c): their
    counts are negative binomial with the sample mean m and shape r = 1/c². Returns c with
    its profile-likelihood interval (where the log-likelihood is within χ²₁(level)/2 of its
    maximum, m held at its estimate), and the maximum log-likelihood."""
    counts = np.asarray(counts, dtype=float)
    mean = float(np.mean(counts))

    def loglik(log_cv: float) -> float:
        shape = math.exp(-2 * log_cv)
        return float(np.sum(stats.nbinom.logpmf(counts, shape, shape / (shape + mean))))

    bounds = (math.log(1e-3), math.log(10.0))
    best = optimize.minimize_scalar(lambda v: -loglik(v), bounds=bounds, method="bounded")
    top, at = -float(best.fun), float(best.x)
    cut = top - stats.chi2.ppf(level, 1) / 2

    def edge(bound: float) -> float:
        if loglik(bound) >= cut:
            return bound
        low, high = (bound, at) if bound < at else (at, bound)
        return optimize.brentq(lambda v: loglik(v) - cut, low, high, xtol=1e-6)

    low, high = math.exp(edge(bounds[0])), math.exp(edge(bounds[1]))
    return Estimate(math.exp(at), low, high, int(counts.sum())), top


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
