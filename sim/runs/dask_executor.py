"""The Dask executor: chunks of replicas as tasks on a Dask cluster.

`--executor dask` without `--scheduler` starts a `distributed.LocalCluster` of
`workers` single-threaded processes; with `--scheduler tcp://host:8786` it uses a
running cluster (Slurm via dask-jobqueue, Kubernetes via the Dask Helm chart or
dask-kubernetes: see docs/scale-out.md). Each task is one chunk; results stream
back as tasks finish, so the table is identical to a serial run with the same seed.
Workers must have the same trainsim installed (a task checks the version).
The caller (`sim/runs/montecarlo.py`) hands in how a chunk becomes a table (`run_table`) and
the error rows of a chunk that could not run (`failed_table`): this module does not
import the Monte Carlo layer back.

Tasks are impure and keyed by the run's seed and a random token, so runs sharing a
cluster never share results. A stop (SIGINT/SIGTERM) sets a Dask `Event` named
after the run, which running chunks ask between replicas: they end at their next
replica and hand in what they did, the tasks not yet started are cancelled, and
the call returns within a couple of seconds. The event stays on the scheduler
(a few bytes) so that chunks still running there stop too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from sim import __version__
from sim.model.scenario_set import ScenarioError
from sim.runs import debugging
from sim.runs.manifest import resume_command, trainsim_command

CONNECT_TIMEOUT = 10.0  # seconds to reach a scheduler
CLOSE_TIMEOUT = 10.0  # seconds to close the client and a local cluster
STOP_GRACE = 2.0  # seconds chunks in flight get to hand in their replicas after a stop
STOP_POLL = 0.25  # seconds between a running chunk's questions "has the run stopped?"
POLL = 0.1  # seconds between the client's looks at finished tasks
NO_WORKERS_NOTICE = 20.0  # seconds without a worker before saying so
DEFAULT_PORT = 8786


Chunk = Any  # sim.runs.montecarlo.Chunk: a point, its plan and a range of replicas
# (chunk, stop flag) -> the chunk's table; (chunk, why) -> error rows for all its replicas
RunTable = Callable[[Chunk, Any], pd.DataFrame]
FailedTable = Callable[[Chunk, str], pd.DataFrame]


class SchedulerLost(ScenarioError):
    """The Dask scheduler or the run's tasks went away: the run fails, the chunks that
    finished are kept. The caller that knows the run directory says the command that
    completes it (`of_run`)."""

    def __init__(self, scheduler: str, reason: str, run_dir: Path | None = None):
        self.scheduler, self.reason = scheduler, reason
        then = (
            f"complete the run with `{resume_command(run_dir)}`"
            if run_dir is not None
            else f"complete the run with `{trainsim_command()} run --resume` and its directory"
        )
        super().__init__(
            "--scheduler",
            scheduler,
            f"lost the Dask scheduler or its tasks ({reason}); the chunks that finished are "
            f"kept in the run directory: {then}",
        )

    def of_run(self, run_dir: Path) -> SchedulerLost:
        return SchedulerLost(self.scheduler, self.reason, run_dir)


class WorkerMismatch(RuntimeError):
    """A worker runs another trainsim version than the client."""


def run_dask(
    todo: list[Chunk],
    workers: int,
    scheduler: str | None,
    deliver,
    advance,
    signals: Any,
    run_table: RunTable,
    failed_table: FailedTable,
) -> None:
    """Run the chunks as Dask tasks (`run_table` on a worker); hand each finished chunk to
    `deliver` and `advance` (a lost task's chunk as `failed_table`'s error rows)."""
    try:
        import distributed
    except ImportError:
        raise ScenarioError(
            "--executor",
            "dask",
            "the dask executor needs Dask's distributed scheduler, which is not installed: "
            "pip install 'trainsim[dask]' (or distributed>=2024.1)",
        ) from None
    if not todo:
        return
    with _quiet_logs():
        cluster = None
        if scheduler:
            client = _connect(distributed, scheduler)
        else:
            with _sigint_blocked():  # in the cluster's threads, hence in its workers
                cluster = distributed.LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    # its HTTP server (metrics, health) on any free port, not 8787
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                    silence_logs=logging.CRITICAL,
                )
            client = distributed.Client(cluster, set_as_default=False)
        try:
            if not signals.stop.is_set():
                _Run(
                    distributed,
                    client,
                    scheduler,
                    todo,
                    deliver,
                    advance,
                    signals,
                    run_table,
                    failed_table,
                ).run()
        finally:
            _close(client, cluster)


class _Run:
    """One run's tasks on one client."""

    def __init__(
        self,
        distributed,
        client,
        scheduler,
        todo,
        deliver,
        advance,
        signals,
        run_table,
        failed_table,
    ):
        self.distributed, self.client, self.scheduler = distributed, client, scheduler
        self.deliver, self.advance, self.signals = deliver, advance, signals
        self.failed_table = failed_table
        token = uuid.uuid4().hex[:12]
        seed = todo[0].seed
        self.stop_name = f"trainsim-stop-{seed}-{token}"
        self.futures = {
            client.submit(
                _run_task,
                run_table,
                chunk,
                __version__,
                self.stop_name,
                key=f"trainsim-{seed}-{token}-p{chunk.point}-r{chunk.first_replica}",
                pure=False,
            ): chunk
            for chunk in todo
        }
        self.finished = distributed.as_completed(list(self.futures), loop=client.loop)

    def run(self) -> None:
        look = time.monotonic() + NO_WORKERS_NOTICE  # when to ask whether workers exist
        if self.scheduler:
            self._check_threads()
        while self.futures:
            if self.signals.stop.is_set():
                self._stop()
                return
            batch = self.finished.next_batch(block=False)
            if batch:
                look = time.monotonic() + NO_WORKERS_NOTICE
                for future in batch:
                    self._collect(future)
                continue
            self._check_client()
            if self.scheduler and time.monotonic() > look:
                look = math.inf if not self.client.nthreads() else look + NO_WORKERS_NOTICE
                if look == math.inf:
                    print(
                        f"waiting for workers: the Dask scheduler at {self.scheduler} has "
                        "none (start them with `dask worker ADDRESS --nthreads 1`, or scale "
                        "the cluster)",
                        file=sys.stderr,
                    )
            self.signals.stop.wait(POLL)

    def _check_threads(self) -> None:
        """Say so once when workers run several threads: replicas are pure Python, so the
        threads of one worker process share one core."""
        with contextlib.suppress(Exception):
            threads = max(self.client.nthreads().values(), default=1)
            if threads > 1:
                print(
                    f"note: the workers of {self.scheduler} run up to {threads} threads each, "
                    "which share one core for trainsim's pure-Python replicas: start them "
                    "with `dask worker ADDRESS --nworkers CORES --nthreads 1`",
                    file=sys.stderr,
                )

    def _collect(self, future, stopping: bool = False) -> None:
        chunk = self.futures.pop(future, None)
        if chunk is None:
            return
        try:
            rows = future.result()
        except Exception as exc:  # noqa: BLE001 - a lost task: its replicas become error rows
            if stopping or self.signals.stop.is_set():
                return  # stopped, not failed: --resume runs the chunk again
            if isinstance(exc, CancelledError):  # not by us: the run cannot finish here
                self._lost(getattr(exc, "reason", "cancelled"))
            self._fatal(exc)
            rows = self.failed_table(chunk, _task_failure(exc))
        self.deliver(chunk, rows)
        self.advance(len(rows))

    def _fatal(self, exc: BaseException) -> None:
        """A worker that cannot run trainsim fails the run, not its replicas."""
        if not isinstance(exc, WorkerMismatch | ImportError):
            return
        raise ScenarioError(
            "--scheduler" if self.scheduler else "--executor",
            self.scheduler or "dask",
            f"a worker of this Dask cluster cannot run trainsim {__version__} "
            f"({type(exc).__name__}: {exc}); install the same trainsim (and its "
            "dependencies) on every worker",
        ) from None

    def _check_client(self) -> None:
        if self.client.status not in ("running", "connecting"):
            self._lost(f"client {self.client.status}")

    def _lost(self, reason: str) -> None:
        """The scheduler went away or cancelled the run's tasks: fail the run, keep its parts."""
        if not self.scheduler:
            raise RuntimeError(f"the local Dask cluster went away ({reason})")
        raise SchedulerLost(self.scheduler, reason)

    def _stop(self) -> None:
        """Stop the chunks in flight at their next replica and keep what they did; cancel
        the rest; return within STOP_GRACE seconds."""
        client = self.client
        with contextlib.suppress(Exception):
            self.distributed.Event(self.stop_name, client=client).set()
        try:
            busy = {key for keys in client.processing().values() for key in keys}
        except Exception:  # noqa: BLE001 - no answer: cancel everything
            busy = set()
        idle = [f for f in self.futures if f.key not in busy]
        with contextlib.suppress(Exception):
            client.cancel(idle)
        deadline = time.monotonic() + STOP_GRACE
        # a second signal (`hurry`): not waiting for the chunks in flight at all
        while (
            self.futures
            and time.monotonic() < deadline
            and not getattr(self.signals, "hurry", False)
        ):
            batch = self.finished.next_batch(block=False)
            for future in batch:
                self._collect(future, stopping=True)
            if not batch:
                time.sleep(POLL / 2)
        with contextlib.suppress(Exception):
            client.cancel(list(self.futures))
        self.futures.clear()


def _run_task(run_table: RunTable, chunk: Chunk, version: str, stop_name: str) -> pd.DataFrame:
    """A chunk on a worker: the client's trainsim, stopping when the run's event is set."""
    if version != __version__:
        raise WorkerMismatch(
            f"worker {socket.gethostname()} has trainsim {__version__}, the client {version}"
        )
    return run_table(chunk, _ClusterStop(stop_name))


class _ClusterStop:
    """The run's stop flag seen from a task: a Dask Event, asked at most every STOP_POLL s."""

    def __init__(self, name: str):
        self.name = name
        self._event: Any = None
        self._set = False
        self._next = 0.0

    def is_set(self) -> bool:
        now = time.monotonic()
        if self._set or now < self._next:
            return self._set
        self._next = now + STOP_POLL
        try:
            if self._event is None:
                from distributed import Event

                self._event = Event(self.name)
            self._set = bool(self._event.is_set())
        except Exception:  # noqa: BLE001 - no scheduler to ask: the chunk runs on
            self._next = now + 10 * STOP_POLL
        return self._set


def _task_failure(exc: BaseException) -> str:
    if type(exc).__name__ == "KilledWorker":
        return f"dask workers died running this chunk (out of memory?): {exc}"
    return f"dask task failed: {type(exc).__name__}: {exc}"


def _connect(distributed, scheduler: str):
    """A client of the scheduler at `scheduler`, or a ScenarioError naming it."""
    check_scheduler(scheduler)
    try:
        return distributed.Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except Exception as exc:  # noqa: BLE001 - it answered a moment ago: say what went wrong
        raise ScenarioError(
            "--scheduler", scheduler, f"cannot connect to the Dask scheduler ({_reason(exc)})"
        ) from None


def check_scheduler_option(executor: str | None, scheduler: str | None) -> None:
    """--scheduler is the Dask executor's: with another executor it would be ignored, so it
    is refused (ScenarioError naming it); with Dask, the scheduler must answer
    (`check_scheduler`)."""
    if not scheduler:
        return
    if executor != "dask":
        raise ScenarioError(
            "--scheduler",
            scheduler,
            f"a Dask scheduler, but the replicas would run on the {executor or 'default'} "
            "executor, which does not use it: add --executor dask, or drop --scheduler",
        )
    check_scheduler(scheduler)


def check_scheduler(scheduler: str) -> dict[str, Any]:
    """Check that a Dask scheduler answers at `scheduler` (within CONNECT_TIMEOUT seconds)
    and return its identity; else raise a ScenarioError naming the address. A refused
    port or an unknown host fails at once."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import backends, get_backend

    hint = (
        "check that the scheduler is running (`dask scheduler` prints its address), that "
        "the host and port are right and that no firewall blocks the port; or drop "
        "--scheduler to run on a local cluster of --workers processes"
    )

    def bad(message: str) -> ScenarioError:
        return ScenarioError("--scheduler", scheduler, message)

    try:
        scheme, location = parse_address(scheduler, strict=False)
        if scheme in ("http", "https"):
            raise bad(
                "a web address (a dashboard's?), not a Dask scheduler's: give "
                "tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786 (a scheduler listens on port "
                f"{DEFAULT_PORT} unless told otherwise)"
            )
        get_backend(scheme)
        host, port = (
            parse_host_port(location, DEFAULT_PORT) if scheme in ("tcp", "tls") else ("", 0)
        )
    except ValueError as exc:
        raise bad(
            f"not a Dask scheduler address ({exc}); expected tcp://HOST:PORT, e.g. "
            f"tcp://10.0.0.5:8786 (schemes: {', '.join(sorted(backends))})"
        ) from None
    if host:  # a refused port or an unknown host fails now, not after CONNECT_TIMEOUT
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
        except OSError as exc:
            raise bad(f"cannot reach a Dask scheduler there ({_reason(exc)}); {hint}") from None
    try:
        with ThreadPoolExecutor(1) as pool:  # a loop of its own, even inside a notebook's
            identity = pool.submit(asyncio.run, _identity(scheduler)).result()
    except Exception as exc:  # noqa: BLE001 - whatever answered, it was not a scheduler
        what = "something answers there, but not as" if host else "cannot reach"
        raise bad(f"{what} a Dask scheduler ({_reason(exc)}); {hint}") from None
    kind = identity.get("type") if isinstance(identity, dict) else None
    if kind != "Scheduler":
        raise bad(
            f"that is a Dask {kind or 'server'}, not the scheduler: give the scheduler's "
            "address (its workers print it as 'Registered to: tcp://...')"
        )
    return identity


async def _identity(address: str) -> Any:
    """The identity of the Dask server at `address`: one connection, one question."""
    from distributed.comm import connect
    from distributed.security import Security

    async def ask() -> Any:
        comm = await connect(
            address, timeout=CONNECT_TIMEOUT, **Security().get_connection_args("client")
        )
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            await comm.close()

    return await asyncio.wait_for(ask(), CONNECT_TIMEOUT)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "its answer is not in Dask's protocol"
    if isinstance(exc, socket.gaierror):
        return f"unknown host: {exc.strerror or exc}"
    if isinstance(exc, TimeoutError | socket.timeout):
        return f"no answer within {CONNECT_TIMEOUT:g} s"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


def _close(client, cluster) -> None:
    """Close the client, then the local cluster; a cluster that will not close in
    CLOSE_TIMEOUT seconds has its worker processes killed."""
    with contextlib.suppress(Exception):
        client.close(timeout=CLOSE_TIMEOUT)
    if cluster is None:
        return
    processes = []
    for nanny in list(getattr(cluster, "workers", {}).values()):
        with contextlib.suppress(Exception):
            processes.append(nanny.process.process)  # AsyncProcess
    try:
        cluster.close(timeout=CLOSE_TIMEOUT)
    except Exception:  # noqa: BLE001 - a hung close: kill what is left
        for process in processes:
            with contextlib.suppress(Exception):
                if process.is_alive():
                    os.kill(process.pid, signal.SIGKILL)


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """No log lines from Dask (client, local scheduler, nannies) or its event loop during
    the run: what goes wrong is reported as an error or as error rows. The levels are put
    back afterwards; TRAINSIM_DEBUG keeps them."""
    if debugging():
        yield
        return
    roots = ("distributed", "tornado", "asyncio")
    names = [
        name
        for name, logger in list(logging.root.manager.loggerDict.items())
        if isinstance(logger, logging.Logger)
        and (name in roots or name.split(".")[0] in roots)
        and logger.level != logging.NOTSET
    ]
    loggers = [logging.getLogger(name) for name in {*roots, *names}]
    saved = [(logger, logger.level) for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread meanwhile: threads started meanwhile (the local cluster's
    event loop) and the processes they start (its workers, at once, and any restarted
    later) inherit the mask. The workers share the terminal's process group, so Ctrl-C
    would reach them too, as a KeyboardInterrupt in a task or an import; it is the
    parent's to handle (it sets the run's stop event). A Ctrl-C meanwhile waits and is
    handled when the mask is put back."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    # multiprocessing's resource tracker, started from a thread, unblocks SIGINT there
    # afterwards (instead of restoring the mask): start it here, before blocking
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
