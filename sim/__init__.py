"""trainsim: discrete-event simulation of multi-week LLM pre-training runs.

The package is grouped by what each part answers (docs/architecture.md): `sim.model`
(what a scenario is and implies), `sim.engine` (one replica), `sim.runs` (many replicas,
run directories), `sim.data` (a user's own incident log), `sim.decide` (answers from
tables), `sim.show` (figures, the report, tables) and `sim.cli` (the command). What a
notebook imports: `sim.model.scenario` (load and validate), `sim.model.perf` and
`sim.model.calculator` (the deterministic calculator), `sim.runs.api` (run a scenario),
`sim.runs.montecarlo` (replicas and sweeps), `sim.decide.analysis` (optimize) and
`sim.show.plots` (figures).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("trainsim")  # one source of truth: pyproject.toml
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
