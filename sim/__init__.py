"""trainsim: discrete-event simulation of multi-week LLM pre-training runs.

The public library API lives in the submodules: `sim.scenario` (load and
validate), `sim.perf` (deterministic calculator), `sim.montecarlo` (replicas and
sweeps), `sim.analysis` (summaries, Young/Daly) and `sim.plots` (figures).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("trainsim")  # one source of truth: pyproject.toml
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
