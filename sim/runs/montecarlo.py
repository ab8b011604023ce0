"""Monte Carlo: replicas × sweep points, on an executor, gathered in chunks.

Replica r uses the same random streams at every sweep point (common random
numbers) and for every executor and worker count, so results are identical
however the work is split. A replica that raises becomes an error row (its
exception text in `error`) and a loud warning, never a dead sweep.

Chunks go to a `sink` as they finish (the run directory's parts), so the caller
never has to hold every row. SIGINT or SIGTERM stops scheduling, lets running
chunks end at their next replica, hands what finished to the sink and raises
`Interrupted`; with the serial executor the replica in flight is abandoned at once
(it runs again on a resume). A second signal stops waiting for the chunks in flight:
their workers are killed. A worker process that dies (the OOM killer) costs only its
chunks: they are retried once in a fresh pool, then recorded as error rows.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa

from sim.engine import ReplicaPlan, RunRecord, build_plan, simulate_replica
from sim.model import columns
from sim.model.scenario_set import ScenarioSet
from sim.runs import arguments, incident_log
from sim.runs.progress import ReplicaBar

# The public columns of replicas.parquet, in order (docs/metrics.md defines each).
COLUMNS = [
    "scenario",
    "point",
    "replica",
    "seed",
    "finished",
    "time_to_train_days",
    "wall_hours",
    "ideal_hours",
    "slowdown_hours",
    "lost_work_hours",
    "checkpoint_stall_hours",
    "downtime_hours",
    "goodput",
    "effective_mfu",
    "failures",
    "checkpoints_written",
    "checkpoints_lost",
    "checkpoint_GB_written",
    "storage_peak_TB",
    "backup_lag_hours",
    "restores_from_backup",
    "restarts",
    "nodes_replaced",
    "nodes_retired",
    "lemons_retired",
    "failures_lemon",
    "nodes_from_pool",
    "preemptions",
    "nodes_drained",
    *columns.DOWNTIME_COLUMNS,
    "stragglers",
    "straggler_hours",
    "rollbacks_beyond_newest",
    "rollback_exhausted",
    "checkpoints_corrupt",
    "lost_gpu_hours",
    "gpu_hours",
    "cost_usd",
    *columns.COST_COLUMNS,
]

Sink = Callable[[int, int, pd.DataFrame], None]  # (point, first replica, rows)

# Count columns (ints in RunRecord): nullable, so that error rows keep one schema.
COUNT_COLUMNS = frozenset(
    f.name for f in dataclasses.fields(RunRecord) if f.type in ("int", int)
) - {"replica", "seed"}


class Interrupted(Exception):
    """SIGINT or SIGTERM stopped the run; the chunks that finished went to the sink."""

    def __init__(self, signal_name: str, done: int, total: int):
        self.signal_name, self.done, self.total = signal_name, done, total
        super().__init__(f"{signal_name}: {done} of {total} replicas done")


@dataclass(frozen=True)
class Chunk:
    point: int
    params: dict[str, Any]
    plan: ReplicaPlan
    first_replica: int
    replicas: int
    seed: int
    swept_keys: tuple[str, ...] = ()
    types: tuple[tuple[str, str], ...] = ()  # the swept columns' types
    incidents: bool = False  # hand in each replica's failures (trainsim run --incidents)


# A worker's stop flag (set by the parent on SIGINT/SIGTERM), installed by `_init_worker`.
_STOP: Any = None

# A raising replica's traceback rides with its row, then with its chunk's table (`attrs`,
# which survives the trip back from a worker), never into a part file.
TRACEBACK = "_traceback"


@dataclass
class ReplicaErrors:
    """The replicas of a run that raised (its error rows): how many of how many rows, and
    the first of them (lowest point, then replica): its point, replica, error text and, when
    it raised in this run, its traceback."""

    count: int = 0
    rows: int = 0
    point: int = -1
    replica: int = -1
    error: str = ""
    traceback: str = ""

    def add(self, frame: pd.DataFrame, traceback_text: str | None = None) -> None:
        """Count a chunk's rows; keep its first error row if it comes before the first so far
        (chunks finish in any order). `traceback_text`: that of the chunk's first error."""
        failed = frame[frame["error"] != ""]
        self.rows += len(frame)
        if not len(failed):
            return
        self.count += len(failed)
        point, replica = int(failed["point"].iloc[0]), int(failed["replica"].iloc[0])
        if self.point < 0 or (point, replica) < (self.point, self.replica):
            self.point, self.replica = point, replica
            self.error = str(failed["error"].iloc[0])
            self.traceback = traceback_text or ""


def _init_worker(stop: Any) -> None:
    """Pool workers: leave Ctrl-C to the parent, stop between replicas when it says so, and
    die with the parent (Linux: PR_SET_PDEATHSIG) instead of living on as orphans."""
    global _STOP
    _STOP = stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):  # no glibc (musl): orphans end with the pool's pipe
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_chunk(
    chunk: Chunk,
    stop: Any = None,
    rows: list[dict] | None = None,
    guard: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> list[dict]:
    """Simulate a chunk of replicas of one point (in a worker). Stops early, returning the
    replicas done so far, when the stop flag is set. `rows` collects them (so that a caller
    whose replica in flight is abandoned keeps those done); `guard` wraps each replica."""
    stop = stop if stop is not None else _STOP
    rows = [] if rows is None else rows
    for replica in range(chunk.first_replica, chunk.first_replica + chunk.replicas):
        if stop is not None and stop.is_set():
            break
        try:
            if guard is None:
                row = _replica_row(chunk, replica)
            else:
                with guard():
                    row = _replica_row(chunk, replica)
            row["error"] = ""
        except Exception as exc:  # noqa: BLE001 - a bad replica must not kill the sweep
            row = error_row(chunk, replica, exc)
            row[TRACEBACK] = "".join(traceback.format_exception(exc))
        row["point"] = chunk.point
        row.update(chunk.params)
        rows.append(row)
    return rows


def _replica_row(chunk: Chunk, replica: int) -> dict:
    """One replica's row; with `chunk.incidents`, its failures too (under incident_log.KEY,
    taken out again by `chunk_table`)."""
    if not chunk.incidents:
        return simulate_replica(chunk.plan, replica, chunk.seed).row()
    record = simulate_replica(chunk.plan, replica, chunk.seed, incidents=True)
    row = record.row()
    row.pop("incidents", None)
    row[incident_log.KEY] = incident_log.rows_of(record.incidents, chunk.point, replica)
    return row


def run_chunk_table(chunk: Chunk, stop: Any = None) -> pd.DataFrame:
    """`run_chunk` as a table with the public schema, built where the chunk ran."""
    return chunk_table(chunk, run_chunk(chunk, stop))


def chunk_table(chunk: Chunk, rows: list[dict]) -> pd.DataFrame:
    """The rows as a table; with `chunk.incidents`, their failures ride along in its attrs, and
    so does the traceback of its first replica that raised (TRACEBACK)."""
    tracebacks = [row.pop(TRACEBACK) for row in rows if TRACEBACK in row]
    incidents = incident_log.take(rows) if chunk.incidents else None
    table = frame_of(rows, list(chunk.swept_keys), dict(chunk.types))
    if tracebacks:
        table.attrs[TRACEBACK] = tracebacks[0]
    return table if incidents is None else incident_log.attach(table, incidents)


def error_row(chunk: Chunk, replica: int, exc: BaseException | str) -> dict:
    if isinstance(exc, BaseException):
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" ({tb[-1].filename}:{tb[-1].lineno})" if tb else ""
        text = f"{type(exc).__name__}: {exc}{where}"
    else:
        text = exc
    return {
        "scenario": chunk.plan.scenario,
        "replica": replica,
        "seed": chunk.seed,
        "finished": False,
        "error": text,
        "point": chunk.point,
        # every chunk has every class column, so that all parts share one schema
        **{f"failures_{fc.name}": None for fc in chunk.plan.failure_classes},
        **chunk.params,
    }


def part_schema(scenario_set: ScenarioSet, point: int, seed: int) -> pa.Schema:
    """The Arrow schema every part of a sweep point has (that of its error rows, which have
    every column a replica's row has, with the same types)."""
    p = scenario_set.points[point]
    keys = tuple(scenario_set.swept_keys)
    types = tuple(sweep_types(scenario_set).items())
    chunk = Chunk(point, p.params, build_plan(p.scenario), 0, 1, seed, keys, types)
    frame = failed_chunk(chunk, "schema")
    return pa.Table.from_pandas(frame, preserve_index=False).schema.remove_metadata()


def failed_chunk(chunk: Chunk, text: str) -> pd.DataFrame:
    """Error rows for every replica of a chunk, with the columns of a chunk that ran (the
    per-class failure counts too: the run's parts must share one schema to merge)."""
    classes = {f"failures_{fc.name}": None for fc in chunk.plan.failure_classes}
    return chunk_table(
        chunk,
        [
            {**classes, **error_row(chunk, r, text)}
            for r in range(chunk.first_replica, chunk.first_replica + chunk.replicas)
        ],
    )


def chunks(
    scenario_set: ScenarioSet,
    replicas: int,
    seed: int,
    chunk_size: int,
    done: dict[int, set[int]] | None = None,
    points: range | None = None,
    incidents: bool = False,
) -> Iterator[Chunk]:
    """The chunks still to run: every point (or a slice) × replicas, less those done. A
    point that cannot run (`infeasible`) has none: nothing of it is built or simulated."""
    done = done or {}
    keys = tuple(scenario_set.swept_keys)
    types = tuple(sweep_types(scenario_set).items())
    for point in scenario_set.points:
        if points is not None and point.index not in points:
            continue
        if point.infeasible is not None:
            continue
        have = done.get(point.index, set())
        missing = [r for r in range(replicas) if r not in have]
        if not missing:
            continue
        plan = build_plan(point.scenario)
        for first, count in _runs(missing, chunk_size):
            yield Chunk(point.index, point.params, plan, first, count, seed, keys, types, incidents)


def _runs(replicas: list[int], size: int) -> Iterator[tuple[int, int]]:
    """Consecutive runs of replica numbers, cut into pieces of at most `size`."""
    start = prev = replicas[0]
    for r in [*replicas[1:], None]:
        if r is not None and r == prev + 1 and r - start < size:
            prev = r
            continue
        yield start, prev - start + 1
        if r is not None:
            start = prev = r


def default_workers() -> int:
    return os.cpu_count() or 1


def default_chunk_size(replicas: int, workers: int) -> int:
    """Small enough to spread the work and to stop within a chunk's time, big enough
    that scheduling costs little."""
    return max(1, min(200, math.ceil(replicas / (4 * workers))))


def run(
    scenario_set: ScenarioSet,
    replicas: int | None = None,
    seed: int | None = None,
    workers: int | None = None,
    executor: str | None = None,
    progress: bool = True,
    chunk_size: int | None = None,
    sink: Sink | None = None,
    done: dict[int, set[int]] | None = None,
    points: range | None = None,
    scheduler: str | None = None,
    incidents: bool = False,
    errors: ReplicaErrors | None = None,
) -> pd.DataFrame | None:
    """Simulate every replica of every sweep point (or the `points` slice, less the replicas
    `done` already has); one row per (point, replica).

    Replicas that raise are error rows, counted in `errors` when it is given (the caller
    reports them); without it, a warning on stderr says how many and the first.

    Without a `sink` the rows come back as one table. With a sink, each finished chunk
    goes to it as a table and nothing is returned. `executor` is serial, processes
    (default when workers > 1) or dask (`scheduler`: the address of a running
    cluster, else a local one).
    """
    if not isinstance(scenario_set, ScenarioSet):
        raise arguments.ArgumentError(
            "run", "scenario_set", "expected a ScenarioSet (sim.model.scenario.load_scenario), "
            f"not {type(scenario_set).__name__}",
        )  # fmt: skip
    base = scenario_set.base.simulation
    replicas = base.replicas if replicas is None else arguments.replicas("run", replicas)
    seed = base.seed if seed is None else arguments.seed("run", seed)
    workers = default_workers() if workers is None else arguments.workers("run", workers)
    executor = arguments.executor("run", executor) or ("processes" if workers > 1 else "serial")
    chunk_size = chunk_size or default_chunk_size(replicas, workers)
    todo = list(chunks(scenario_set, replicas, seed, chunk_size, done, points, incidents))
    total = sum(c.replicas for c in todo)
    if scheduler is None:  # a process (or local Dask worker) per chunk at most: no idle forks
        workers = max(1, min(workers, len(todo)))
    types = sweep_types(scenario_set)
    frames: list[pd.DataFrame] = []
    warn = errors is None  # nobody to report the error rows to: a warning says them
    errors = ReplicaErrors() if errors is None else errors

    def deliver(chunk: Chunk, frame: pd.DataFrame) -> None:
        traceback_text = frame.attrs.pop(TRACEBACK, None)
        if not len(frame):
            return
        errors.add(frame, traceback_text)
        if sink is None:
            frames.append(frame)
        else:
            sink(chunk.point, chunk.first_replica, frame)

    with ReplicaBar(progress, total, scenario_set.name) as advance, _Signals() as signals:
        if executor == "serial":
            _run_serial(todo, deliver, advance, signals)
        elif executor == "processes":
            _run_processes(todo, workers, deliver, advance, signals)
        else:
            from sim.runs.dask_executor import run_dask

            run_dask(
                todo, workers, scheduler, deliver, advance, signals, run_chunk_table, failed_chunk
            )
        if signals.caught:
            raise Interrupted(signals.caught, errors.rows, total)

    if warn and errors.count:
        print(
            f"WARNING: {errors.count} of {errors.rows} replicas raised and are error rows; "
            f"first: point {errors.point} replica {errors.replica}: {errors.error}",
            file=sys.stderr,
        )
    if sink is not None:
        return None
    if not frames:
        return frame_of([], scenario_set.swept_keys, types)
    table = pd.concat(frames, ignore_index=True)
    return table.sort_values(["point", "replica"], kind="stable").reset_index(drop=True)


def _run_serial(todo: list[Chunk], deliver, advance, signals: _Signals) -> None:
    """Chunks one after the other in this process. A stop abandons the replica in flight
    (a signal raises `_Abort` in it): the chunk's replicas done before it are kept."""
    for chunk in todo:
        if signals.stop.is_set():
            break
        rows: list[dict] = []
        with contextlib.suppress(_Abort):
            run_chunk(chunk, signals.stop, rows, signals.abortable)
        if rows:
            frame = chunk_table(chunk, rows)
            deliver(chunk, frame)
            advance(len(frame))


def _run_processes(todo: list[Chunk], workers: int, deliver, advance, signals: _Signals) -> None:
    """A process pool with at most two chunks per worker in flight. A pool broken by a dead
    worker is replaced; the chunks in flight when it broke are tried once more, then
    recorded as error rows."""
    attempts = [0] * len(todo)
    queue = list(range(len(todo)))  # chunk indices still to run, in order
    context = multiprocessing.get_context()
    stop = context.Event()
    signals.on_stop = stop.set
    while queue and not signals.stop.is_set():
        pool = ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_init_worker, initargs=(stop,)
        )
        in_flight: dict[Future, int] = {}
        broken = False
        try:
            while (queue or in_flight) and not signals.stop.is_set():
                broken = _refill(pool, todo, queue, in_flight, 2 * workers) or broken
                finished, _ = wait(in_flight, timeout=0.2, return_when=FIRST_COMPLETED)
                if not broken:  # keep the workers busy while this process writes
                    broken = _refill(pool, todo, queue, in_flight, 2 * workers + len(finished))
                for future in finished:
                    i = in_flight.pop(future)
                    try:
                        frame = future.result()
                    except BrokenProcessPool:
                        broken = True
                        attempts[i] += 1
                        if attempts[i] < 2:
                            queue.insert(0, i)
                            continue
                        frame = _died(todo[i])
                    deliver(todo[i], frame)
                    advance(len(frame))
                if broken and not in_flight:
                    break  # the pool is broken: start a fresh one
            # stopping: chunks in flight end at their next replica and hand in what they
            # did, for up to STOP_GRACE seconds (a second signal: not at all)
            deadline = time.monotonic() + STOP_GRACE
            while in_flight and not signals.hurry and time.monotonic() < deadline:
                finished, _ = wait(in_flight, timeout=0.05, return_when=FIRST_COMPLETED)
                for future in finished:
                    i = in_flight.pop(future)
                    try:
                        frame = future.result()
                    except Exception:  # noqa: BLE001 - broken: resume runs it again
                        continue
                    deliver(todo[i], frame)
                    advance(len(frame))
        finally:
            _shutdown(pool, signals.stop.is_set(), 0.0 if signals.hurry else STOP_GRACE)
        queue.sort()


def _refill(
    pool: ProcessPoolExecutor,
    todo: list[Chunk],
    queue: list[int],
    in_flight: dict[Future, int],
    limit: int,
) -> bool:
    """Submit queued chunks until `limit` are in flight; True if the pool is broken."""
    while queue and len(in_flight) < limit:
        i = queue.pop(0)
        try:
            in_flight[pool.submit(run_chunk_table, todo[i])] = i
        except BrokenProcessPool:
            queue.insert(0, i)
            return True
    return False


def _died(chunk: Chunk) -> pd.DataFrame:
    """Error rows for a chunk whose worker died twice."""
    last = chunk.first_replica + chunk.replicas
    rows = [
        error_row(chunk, r, "worker process died twice (killed, out of memory?)")
        for r in range(chunk.first_replica, last)
    ]
    return chunk_table(chunk, rows)


STOP_GRACE = 3.0  # seconds chunks in flight get to hand in their replicas after a stop


@contextlib.contextmanager
def stoppable_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A process pool whose workers leave Ctrl-C to this process and die with it
    (`_init_worker`). Left by an exception (Ctrl-C's KeyboardInterrupt, a stop), its workers
    are killed at once rather than left to finish their tasks: no wait, no orphan."""
    context = multiprocessing.get_context()
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_init_worker,
        initargs=(context.Event(),),
    )  # fmt: skip
    try:
        yield pool
    except BaseException:
        _shutdown(pool, stopping=True, grace=0.0)
        raise
    _shutdown(pool, stopping=False)


def _shutdown(pool: ProcessPoolExecutor, stopping: bool, grace: float = STOP_GRACE) -> None:
    """Shut the pool down; after a stop, workers still busy after `grace` seconds are
    killed."""
    if not stopping:
        pool.shutdown(wait=True)
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + grace
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()


class _Abort(BaseException):
    """A stop signal raised in a replica that runs in the main thread (serial executor): a
    BaseException, so that the replica's error handling does not turn it into a row."""


# seconds after a stop during which further SIGINT/SIGTERM are ignored (the run is on its
# way out: a second Ctrl-C must not turn a clean stop into a traceback or a lost status)
AFTER_STOP_S = 10.0


class _Signals:
    """SIGINT and SIGTERM set a stop flag instead of killing the run (main thread only). A
    second one sets `hurry`: stop waiting for the chunks in flight. While `abortable` is
    entered (a replica running in this thread), a signal also raises `_Abort` there."""

    def __init__(self):
        self.stop = threading.Event()
        self.caught = ""
        self.hurry = False
        self.on_stop: Callable[[], None] | None = None
        self._previous: dict[int, Any] = {}
        self._abortable = False

    def _handle(self, signum, frame) -> None:
        if self.stop.is_set():
            self.hurry = True  # a second signal: stop waiting
        else:
            self.caught = signal.Signals(signum).name
            self.stop.set()
            if self.on_stop is not None:
                self.on_stop()
        if self._abortable:
            self._abortable = False
            raise _Abort

    @contextlib.contextmanager
    def abortable(self) -> Iterator[None]:
        self._abortable = not self.stop.is_set()
        try:
            yield
        finally:
            self._abortable = False

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        if self.caught and self._previous:
            _ignore_for_a_while(self._previous)
            return
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def _ignore_for_a_while(previous: dict[int, Any]) -> None:
    """After a stop: ignore SIGINT/SIGTERM for AFTER_STOP_S seconds (the caller is saving
    what finished and exiting), then handle them as before."""
    until = time.monotonic() + AFTER_STOP_S

    def handle(signum, frame) -> None:
        if time.monotonic() < until:
            return
        for number, handler in previous.items():
            signal.signal(number, handler)
        handler = previous.get(signum)
        if callable(handler):
            handler(signum, frame)
        elif handler == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for signum in previous:
        signal.signal(signum, handle)


@contextlib.contextmanager
def stop_on_signals(done: int = 0, total: int = 0) -> Iterator[None]:
    """SIGINT or SIGTERM raise `Interrupted` at once in the main thread meanwhile (writing
    a run's table, summaries and figures: nothing to wait for); further ones are then
    ignored for a while, as after a stop of the simulation."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    caught = []

    def handle(signum, frame) -> None:
        if caught:
            return
        caught.append(signal.Signals(signum).name)
        raise Interrupted(caught[0], done, total)

    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, handle)
    try:
        yield
    finally:
        if caught:
            _ignore_for_a_while(previous)
        else:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def sweep_types(scenario_set: ScenarioSet) -> dict[str, str]:
    """One column type per swept key, from all its values: every chunk writes the same
    schema (boolean, Int64, float64 or string; a null value stays missing)."""
    types = {}
    for key in scenario_set.swept_keys:
        values = [p.params[key] for p in scenario_set.points if p.params[key] is not None]
        if values and all(isinstance(v, bool) for v in values):
            types[key] = "boolean"
        elif values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            types[key] = "Int64"
        elif values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            types[key] = "float64"
        else:
            types[key] = "string"
    return types


def frame_of(rows: list[dict], swept_keys: list[str], types: dict[str, str]) -> pd.DataFrame:
    """Rows as a table with the public columns in order and one schema for every chunk."""
    table = pd.DataFrame(rows)
    class_columns = sorted(
        c for c in table.columns if c.startswith("failures_") and c not in COLUMNS
    )
    order = COLUMNS + class_columns + swept_keys + ["error"]
    for column in order:
        if column not in table:
            table[column] = math.nan
    table = table[order + [c for c in table.columns if c not in order]]
    table = table.sort_values(["point", "replica"], kind="stable").reset_index(drop=True)
    table["finished"] = table["finished"].astype(bool)
    for column in ("point", "replica", "seed"):
        table[column] = table[column].astype("int64")
    for column in [*COUNT_COLUMNS, *class_columns]:
        if column in table:
            table[column] = table[column].astype("Int64")
    for column in ("scenario", "error"):
        table[column] = table[column].astype(str)
    for key in swept_keys:
        if types.get(key) == "string":
            table[key] = table[key].map(lambda v: None if v is None else str(v)).astype("string")
        elif key in types:
            table[key] = table[key].astype(types[key])
    return table
