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
    "lasting_faults": 10,  # whether a node-attributable failure leaves a lasting fault
    "spare_order": 11,  # which warm spare fills a slot (spare_order: random)
}


def stream(seed: int, replica: int, name: str, index: int = 0) -> np.random.Generator:
    sequence = np.random.SeedSequence(seed, spawn_key=(replica, STREAMS[name], index))
    return np.random.Generator(np.random.PCG64(sequence))


BLOCK = 256  # draws per numpy call


class Draws:
    """Scalar draws from one generator as Python floats, taken from blocks drawn with one
    numpy call each (a numpy scalar draw costs ~1 µs, a float from a block ~0.05 µs).
    Exponentials and uniforms come from separate blocks of the same stream."""

    __slots__ = ("rng", "_exp", "_next_exp", "_uni", "_next_uni")

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self._exp: list[float] = []
        self._uni: list[float] = []
        self._next_exp = self._next_uni = 0

    def exponential(self, mean: float) -> float:
        if self._next_exp >= len(self._exp):
            self._exp = self.rng.standard_exponential(BLOCK).tolist()
            self._next_exp = 0
        self._next_exp += 1
        return self._exp[self._next_exp - 1] * mean

    def random(self) -> float:
        if self._next_uni >= len(self._uni):
            self._uni = self.rng.random(BLOCK).tolist()
            self._next_uni = 0
        self._next_uni += 1
        return self._uni[self._next_uni - 1]


class LazyStreams:
    """One named stream per failure class (as `Draws`), each created when first drawn from:
    most replicas never repair a storage tier or a cable, and a generator costs more to build
    than many draws. The numbers are the same as if built up front."""

    __slots__ = ("seed", "replica", "name", "_made")

    def __init__(self, seed: int, replica: int, name: str):
        self.seed, self.replica, self.name = seed, replica, name
        self._made: dict[int, Draws] = {}

    def __getitem__(self, index: int) -> Draws:
        draws = self._made.get(index)
        if draws is None:
            draws = self._made[index] = Draws(stream(self.seed, self.replica, self.name, index))
        return draws
