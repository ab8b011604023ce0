"""Many replicas: the Monte Carlo over sweep points on an executor (serial, processes,
Dask), its progress, run directories, incident logs, a run's summary table, and the
library calls behind `trainsim run`, `merge` and `export` (`sim.runs.api`).
It imports the model and the engine, nothing above."""
