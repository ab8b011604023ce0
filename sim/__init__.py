"""trainsim: discrete-event simulation of multi-week LLM pre-training runs.

The public library API lives in the submodules: `sim.model.scenario` (load and
validate), `sim.model.perf` (deterministic calculator), `sim.runs.montecarlo` (replicas and
sweeps), `sim.decide.analysis` (summaries, Young/Daly) and `sim.show.plots` (figures).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("trainsim")  # one source of truth: pyproject.toml
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
