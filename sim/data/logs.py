"""Reading and checking an incident log (CSV or parquet, or trainsim's own incidents.parquet
of a run directory): its columns, times, window, nodes, classes, scopes and repair times,
into an `IncidentLog` (`read_log`, `log_from_table`). docs/fitting.md gives the format.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.model.scenario_set import ScenarioError
from sim.model.schema import MAX_HOURS
from sim.runs import arguments as check

# the columns a log may have (the last four are those trainsim adds to its own logs)
REQUIRED = ("time", "node")
OPTIONAL = ("class", "repair_hours", "scope", "replica", "point", "lasting_fault", "repair_path")
SCOPES = ("gpu", "node", "job", "link", "switch", "storage")
NODE_SCOPES = ("gpu", "node")  # node-attributable: the lemon test counts these
DEFAULT_CLASS = "all"
HOURS_PER_DAY = 24.0


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
    # the fleet's age at the window's start (hours since it was brought up); None: unknown
    fleet_age_hours: float | None = None

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
    fleet_age_days: float | None = None,
) -> IncidentLog:
    """Read and check an incident log (CSV or parquet). `start`/`end` bound the window: hours
    since its start for a log in hours, ISO 8601 for one in dates (then `start` is needed).
    A trainsim log (`incidents.parquet` of a run) is read for one `replica` and `point`, its
    window and nodes taken from the run directory beside it unless given: only a log with
    trainsim's replica/point columns, with the run's run.json beside it, is read as a run's
    (a user's own log never takes a scenario.yaml that happens to lie next to it)."""
    nodes = check.count("read_log", "nodes", nodes)
    gpus_per_node = check.count("read_log", "gpus_per_node", gpus_per_node)
    if fleet_age_days is not None:
        fleet_age_days = check.number("read_log", "fleet_age_days", fleet_age_days, 0.0, 1e6)
    frame = _read_table(Path(path))
    return log_from_table(
        frame, str(path), nodes, gpus_per_node, start, end, replica, point,
        _run_dir_of(Path(path), frame), fleet_age_days,
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
    fleet_age_days: float | None = None,
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
    if fleet_age_days is None:
        fleet_age_days = run_defaults.get("fleet_age_days")
    return IncidentLog(
        source, events, window, int(nodes), int(gpus_per_node), tuple(warnings),
        None if fleet_age_days is None else float(fleet_age_days) * HOURS_PER_DAY,
    )  # fmt: skip


def _read_table(path: Path) -> pd.DataFrame:
    source = str(path)
    if not path.is_file():
        raise ScenarioError(source, "", "no such file: expected an incident log (CSV or parquet)")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            _refuse_nested(source, pq.read_schema(path))
            return pd.read_parquet(path)
        # only an empty cell is missing: a host named NA, None or null is a name
        return pd.read_csv(
            path,
            dtype={"time": str, "node": str, "class": str, "scope": str},
            keep_default_na=False,
            na_values={"repair_hours": [""], "time": [""], "node": [""], "class": [""],
                       "scope": [""], "replica": [""], "point": [""]},
        )  # fmt: skip
    except ScenarioError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure is bad input
        raise ScenarioError(
            source, "", f"cannot read the log ({type(exc).__name__}: {exc}); expected CSV "
            "with a header row, or parquet",
        ) from None  # fmt: skip


def _refuse_nested(source: str, schema: pa.Schema) -> None:
    """A list, map or struct column holds several values per row: never read as a name."""
    for field in schema:
        if pa.types.is_nested(field.type):
            raise ScenarioError(
                source, f"column {field.name}", f"a nested parquet column ({field.type}): "
                "expected one value per row (a name, a number or a time); flatten it first",
            )  # fmt: skip


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


def _run_cluster(scenario: Path, source: str) -> dict[str, Any]:
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
    found: dict[str, Any] = {}
    aging = cluster.get("aging")
    if isinstance(aging, dict):
        age = aging.get("age_days", aging.get("rated_at_days"))
        if isinstance(age, int | float) and not isinstance(age, bool) and age >= 0:
            found["fleet_age_days"] = float(age)
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
    if column.dtype == object:  # cells of any kind: a number column holds numbers only
        odd = column.map(lambda v: isinstance(v, list | tuple | dict | set | np.ndarray | bool))
        if odd.any():
            row = int(np.flatnonzero(odd.to_numpy())[0])
            raise ScenarioError(
                source, f"row {row + 1}, column node",
                f"{_plain(column.iloc[row])}: a node is one whole number >= 0, a name, or empty",
            )  # fmt: skip
        column = column.map(lambda v: str(v) if isinstance(v, int) and abs(v) >= 2**62 else v)
    elif column.dtype == bool:
        raise ScenarioError(
            source, "row 1, column node",
            f"{_plain(column.iloc[0])}: a node is one whole number >= 0, a name, or empty",
        )  # fmt: skip
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
