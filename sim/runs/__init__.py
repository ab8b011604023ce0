"""Many replicas: the Monte Carlo over sweep points on an executor (serial, processes,
Dask), its progress, run directories, incident logs, a run's summary table, and the
library calls behind `trainsim run`, `merge` and `export` (`sim.runs.api`).
It imports the model and the engine, nothing above."""

import os

DEBUG_ENV = "TRAINSIM_DEBUG"


def debugging() -> bool:
    """TRAINSIM_DEBUG asks for tracebacks and Dask's logs: set to anything but empty, 0,
    false, no or off."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")
