"""The replica's random streams: a fixed table of stream ids and the generators built from it.

Replica r of seed s draws from `SeedSequence(s, spawn_key=(r, STREAM, class_index))`, with
STREAM from the table below (append only: changing one changes every result). The streams do
not depend on the sweep point, so every point of a sweep sees the same failure lifetimes
(common random numbers). A leaf module: it imports nothing from the engine.
"""

from __future__ import annotations

import numpy as np

# Stream table: fixed ids, only ever appended to (changing one changes every result).
STREAMS = {
    "failure_lifetimes": 0,
    "repair_times": 1,
    "fabric_repairs": 2,
    "storage_repairs": 3,
    "lemons": 4,  # which nodes start with a fault
    "repair_pipeline": 5,  # stage times and outcomes of the repair pipeline
    "misdiagnosis": 6,
    "health_checks": 7,  # which failing nodes a check catches
    "checkpoint_corruption": 8,  # a uniform per checkpoint written
    "stragglers": 9,  # onsets, nodes, slowdowns, clearing times
}


def stream(seed: int, replica: int, name: str, index: int = 0) -> np.random.Generator:
    sequence = np.random.SeedSequence(seed, spawn_key=(replica, STREAMS[name], index))
    return np.random.Generator(np.random.PCG64(sequence))


class LazyStreams:
    """One named stream per failure class, each created when first drawn from: most
    replicas never repair a storage tier or a cable, and a generator costs more to build
    than many draws. The numbers are the same as if built up front."""

    __slots__ = ("seed", "replica", "name", "_made")

    def __init__(self, seed: int, replica: int, name: str):
        self.seed, self.replica, self.name = seed, replica, name
        self._made: dict[int, np.random.Generator] = {}

    def __getitem__(self, index: int) -> np.random.Generator:
        rng = self._made.get(index)
        if rng is None:
            rng = self._made[index] = stream(self.seed, self.replica, self.name, index)
        return rng
