"""trainsim: discrete-event simulation of multi-week LLM pre-training runs.

The package is grouped by what each part answers (docs/architecture.md): `sim.model`
(what a scenario is and implies), `sim.engine` (one replica), `sim.runs` (many replicas,
run directories), `sim.data` (a user's own incident log), `sim.decide` (answers from
tables), `sim.show` (figures, the report, tables) and `sim.cli` (the command). What a
notebook imports: `sim.model.scenario` (load and validate), `sim.model.perf` and
`sim.model.calculator` (the deterministic calculator), `sim.runs.api` (run a scenario),
`sim.runs.montecarlo` (replicas and sweeps), `sim.decide.analysis` (optimize) and
`sim.show.plots` (figures).

Importing the package runs nothing: `__version__` is read from the package metadata when
first asked for. (The `trainsim` executable imports this package before its entry point
can catch a Ctrl-C; importlib.metadata here would make that window tens of milliseconds.)
"""


def __getattr__(name: str) -> str:
    if name != "__version__":
        raise AttributeError(f"module 'sim' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("trainsim")  # one source of truth: pyproject.toml
    except PackageNotFoundError:  # a source tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found
