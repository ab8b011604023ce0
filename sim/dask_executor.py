"""The Dask executor: chunks of replicas as tasks on a Dask cluster.

`--executor dask` without `--scheduler` starts a `distributed.LocalCluster` of
`workers` single-threaded processes; with `--scheduler tcp://host:8786` it uses a
running cluster (Slurm via dask-jobqueue, Kubernetes via the Dask Helm chart or
dask-kubernetes: see docs/scale-out.md). Each task is one chunk; results stream
back as tasks finish, so the table is identical to a serial run with the same seed.
Workers must have the same trainsim installed.
"""

from __future__ import annotations

import logging
from typing import Any

from sim.montecarlo import Chunk, chunk_table, error_row, run_chunk_table


def run_dask(
    todo: list[Chunk], workers: int, scheduler: str | None, deliver, advance, signals: Any
) -> None:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise RuntimeError(
            "the dask executor needs Dask's distributed scheduler: pip install 'trainsim[dask]'"
        ) from None
    cluster = None
    if scheduler:
        try:
            client = Client(scheduler, timeout="15s")
        except OSError as exc:
            raise RuntimeError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    else:
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
    try:
        futures = {
            client.submit(run_chunk_table, chunk, key=f"trainsim-p{chunk.point}-r{chunk.first_replica}",
                          pure=False): chunk
            for chunk in todo
        }  # fmt: skip
        for future in as_completed(list(futures)):
            chunk = futures.pop(future)
            if signals.stop.is_set():
                client.cancel(list(futures))
                break
            try:
                rows = future.result()
            except Exception as exc:  # noqa: BLE001 - a lost task: its replicas become error rows
                rows = chunk_table(
                    chunk,
                    [
                        error_row(chunk, r, f"dask task failed: {type(exc).__name__}: {exc}")
                        for r in range(chunk.first_replica, chunk.first_replica + chunk.replicas)
                    ],
                )
            deliver(chunk, rows)
            advance(len(rows))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
