"""The Dask executor: chunks of replicas as tasks on a Dask cluster.

`--executor dask` without `--scheduler` starts a `distributed.LocalCluster` of
`workers` single-threaded processes; with `--scheduler tcp://host:8786` it uses a
running cluster (Slurm via dask-jobqueue, Kubernetes via the Dask Helm chart or
dask-kubernetes: see docs/scale-out.md). Each task is one chunk; results stream
back as tasks finish, so the table is identical to a serial run with the same seed.
Workers must have the same trainsim installed (a task checks the version).

Tasks are impure and keyed by the run's seed and a random token, so runs sharing a
cluster never share results. A stop (SIGINT/SIGTERM) sets a Dask `Event` named
after the run, which running chunks ask between replicas: they end at their next
replica and hand in what they did, the tasks not yet started are cancelled, and
the call returns within a couple of seconds. The event stays on the scheduler
(a few bytes) so that chunks still running there stop too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pandas as pd

from sim import __version__
from sim.montecarlo import Chunk, chunk_table, error_row, run_chunk_table
from sim.scenario import ScenarioError

CONNECT_TIMEOUT = 10.0  # seconds to reach a scheduler
CLOSE_TIMEOUT = 10.0  # seconds to close the client and a local cluster
STOP_GRACE = 2.0  # seconds chunks in flight get to hand in their replicas after a stop
STOP_POLL = 0.25  # seconds between a running chunk's questions "has the run stopped?"
POLL = 0.1  # seconds between the client's looks at finished tasks
NO_WORKERS_NOTICE = 20.0  # seconds without a worker before saying so
DEFAULT_PORT = 8786


class WorkerMismatch(RuntimeError):
    """A worker runs another trainsim version than the client."""


def run_dask(
    todo: list[Chunk], workers: int, scheduler: str | None, deliver, advance, signals: Any
) -> None:
    """Run the chunks as Dask tasks; hand each finished chunk to `deliver` and `advance`."""
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
                    silence_logs=logging.ERROR,
                )
            client = distributed.Client(cluster, set_as_default=False)
        try:
            if not signals.stop.is_set():
                _Run(distributed, client, scheduler, todo, deliver, advance, signals).run()
        finally:
            _close(client, cluster)


class _Run:
    """One run's tasks on one client."""

    def __init__(self, distributed, client, scheduler, todo, deliver, advance, signals):
        self.distributed, self.client, self.scheduler = distributed, client, scheduler
        self.deliver, self.advance, self.signals = deliver, advance, signals
        token = uuid.uuid4().hex[:12]
        seed = todo[0].seed
        self.stop_name = f"trainsim-stop-{seed}-{token}"
        self.futures = {
            client.submit(
                _run_task,
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
        quiet_since = time.monotonic()
        told = False
        while self.futures:
            if self.signals.stop.is_set():
                self._stop()
                return
            batch = self.finished.next_batch(block=False)
            if batch:
                quiet_since = time.monotonic()
                for future in batch:
                    self._collect(future)
                continue
            self._check_client()
            if (
                self.scheduler
                and not told
                and time.monotonic() - quiet_since > NO_WORKERS_NOTICE
                and not self.client.nthreads()
            ):
                told = True
                print(
                    f"waiting for workers: the Dask scheduler at {self.scheduler} has none yet "
                    "(start them with `dask worker ADDRESS --nthreads 1`, or scale the cluster)",
                    file=sys.stderr,
                )
            self.signals.stop.wait(POLL)

    def _collect(self, future, stopping: bool = False) -> None:
        chunk = self.futures.pop(future, None)
        if chunk is None:
            return
        try:
            rows = future.result()
        except Exception as exc:  # noqa: BLE001 - a lost task: its replicas become error rows
            if stopping or self.signals.stop.is_set():
                return  # stopped, not failed: --resume runs the chunk again
            self._fatal(exc)
            rows = chunk_table(
                chunk,
                [
                    error_row(chunk, r, _task_failure(exc))
                    for r in range(chunk.first_replica, chunk.first_replica + chunk.replicas)
                ],
            )
        self.deliver(chunk, rows)
        self.advance(len(rows))

    def _fatal(self, exc: BaseException) -> None:
        """A worker that cannot run trainsim fails the run, not its replicas."""
        if not isinstance(exc, WorkerMismatch | ImportError):
            return
        where = self.scheduler or "a local Dask cluster"
        raise ScenarioError(
            "--scheduler" if self.scheduler else "--executor",
            self.scheduler or "dask",
            f"a worker of {where} cannot run this trainsim ({type(exc).__name__}: {exc}); "
            f"install trainsim {__version__} (and its dependencies) on every worker",
        ) from None

    def _check_client(self) -> None:
        if self.client.status in ("running", "connecting"):
            return
        if self.scheduler:
            raise ScenarioError(
                "--scheduler",
                self.scheduler,
                f"lost the connection to the Dask scheduler (client {self.client.status}); "
                "the chunks that finished are kept in the run directory: "
                "complete the run with trainsim run --resume RUN_DIR",
            )
        raise RuntimeError(f"the local Dask cluster went away (client {self.client.status})")

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
        while self.futures and time.monotonic() < deadline:
            batch = self.finished.next_batch(block=False)
            for future in batch:
                self._collect(future, stopping=True)
            if not batch:
                time.sleep(POLL / 2)
        with contextlib.suppress(Exception):
            client.cancel(list(self.futures))
        self.futures.clear()


def _run_task(chunk: Chunk, version: str, stop_name: str) -> pd.DataFrame:
    """A chunk on a worker: the client's trainsim, stopping when the run's event is set."""
    if version != __version__:
        raise WorkerMismatch(
            f"worker {socket.gethostname()} has trainsim {__version__}, the client {version}"
        )
    return run_chunk_table(chunk, _ClusterStop(stop_name))


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
    from distributed.comm.addressing import parse_address, parse_host_port

    hint = (
        "check that the scheduler is running (`dask scheduler` prints its address), that "
        "the host and port are right and that no firewall blocks the port; or drop "
        "--scheduler to run on a local cluster of --workers processes"
    )
    try:
        scheme, location = parse_address(scheduler, strict=False)
        if scheme in ("tcp", "tls"):
            host, port = parse_host_port(location, DEFAULT_PORT)
    except ValueError as exc:
        raise ScenarioError(
            "--scheduler",
            scheduler,
            f"not a Dask scheduler address ({exc}); expected tcp://HOST:PORT, e.g. "
            "tcp://10.0.0.5:8786",
        ) from None
    if scheme in ("tcp", "tls"):  # a quick look first: a refused port fails now, not later
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
        except OSError as exc:
            raise ScenarioError(
                "--scheduler",
                scheduler,
                f"cannot reach a Dask scheduler there ({_reason(exc)}); {hint}",
            ) from None
    try:
        return distributed.Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ScenarioError(
            "--scheduler",
            scheduler,
            f"cannot connect to a Dask scheduler there ({_reason(exc)}); {hint}",
        ) from None


def _reason(exc: BaseException) -> str:
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
    """Dask's own log lines (client, local scheduler, nannies) at ERROR and above only,
    during the run; the levels are put back afterwards (TRAINSIM_DEBUG keeps them)."""
    if os.environ.get("TRAINSIM_DEBUG"):
        yield
        return
    loggers = [logging.getLogger("distributed")]
    saved = [(logger, logger.level, [h.level for h in logger.handlers]) for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level, handler_levels in saved:
            logger.setLevel(level)
            for handler, handler_level in zip(logger.handlers, handler_levels):
                handler.setLevel(handler_level)


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
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
