"""The replica's random streams: a fixed table of stream ids and the generators built from it.

Replica r of seed s draws from `SeedSequence(s, spawn_key=(r, STREAM, class_index))`, with
STREAM from the table below (append only: changing one changes every result). The streams do
not depend on the sweep point, so every point of a sweep sees the same failure lifetimes
(common random numbers). A leaf module: it imports nothing from the engine.
"""

from __future__ import annotations

import numpy as np
from numpy.random.bit_generator import ISeedSequence

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
    "node_rates": 12,  # each node's own rate multiplier (cluster.node_rate_cv)
    "recurrences": 13,  # when a failure whose repair did not hold comes back (refail_hours)
    "repairs_holding": 14,  # whether a repair holds (refail_prob)
}


def stream(seed: int, replica: int, name: str, index: int = 0) -> np.random.Generator:
    stream_id = STREAMS[name]
    if 0 <= seed < 1 << 128 and 0 <= replica <= _M and 0 <= stream_id <= _M and 0 <= index <= _M:
        return np.random.Generator(np.random.PCG64(_Key(_words(seed, replica, stream_id, index))))
    sequence = np.random.SeedSequence(seed, spawn_key=(replica, stream_id, index))
    return np.random.Generator(np.random.PCG64(sequence))


# `SeedSequence(seed, spawn_key=(replica, stream, index)).generate_state(4, np.uint64)`, the
# key PCG64 seeds itself with, computed in plain integers by numpy's own algorithm (its
# entropy: the seed's four 32-bit words, then the replica, stream and index; hash
# constants that depend only on how many words were mixed before): the same numbers
# (tests/engine/test_streams.py checks them against numpy) at half the cost of numpy's
# object, and the pools after the seed, the replica and the stream are kept for the next.
_M = 0xFFFFFFFF
_MULT_A, _MULT_B = 0x931E8875, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_HA = [0x43B0D7E5]  # the hash constant before each hashmix of the entropy
for _ in range(32):
    _HA.append(_HA[-1] * _MULT_A & _M)
_HB = [0x8B51F9DD]  # ... before each output word
for _ in range(8):
    _HB.append(_HB[-1] * _MULT_B & _M)
# the (xor, multiply) constants of entropy word 4 (the replica), 5 (the stream), 6 (the index)
_WORD = [tuple((_HA[k + d], _HA[k + d + 1]) for d in range(4)) for k in (16, 20, 24)]
_OUT = tuple((_HB[i], _HB[i + 1]) for i in range(8))
# (seed, replica) and (seed, replica, stream) -> the pool after them (a replica's streams
# share the first, a failure class's streams of one kind the second)
_pools: dict[tuple, tuple[int, int, int, int]] = {}
_seed_pools: dict[int, tuple[int, int, int, int]] = {}  # seed -> pool (one seed per run)


def _seed_pool(seed: int) -> tuple[int, int, int, int]:
    """The pool after the seed's four words (padded with zeros) and their cross-mixing."""
    pool = _seed_pools.get(seed)
    if pool is None:
        if len(_seed_pools) > 64:
            _seed_pools.clear()
        pool = _seed_pools[seed] = _mixed_seed(seed)
    return pool


def _mixed_seed(seed: int) -> tuple[int, int, int, int]:
    k, pool = 0, []
    for i in range(4):
        h = (((seed >> (32 * i)) & _M) ^ _HA[k]) * _HA[k + 1] & _M
        pool.append(h ^ (h >> 16))
        k += 1
    for src in range(4):
        for dst in range(4):
            if src != dst:
                h = (pool[src] ^ _HA[k]) * _HA[k + 1] & _M
                h ^= h >> 16
                k += 1
                r = (_MIX_L * pool[dst] - _MIX_R * h) & _M
                pool[dst] = r ^ (r >> 16)
    return pool[0], pool[1], pool[2], pool[3]


def _mix(pool: tuple[int, int, int, int], word: int, consts) -> tuple[int, int, int, int]:
    """The pool with one more entropy word mixed into each of its four words."""
    (a0, b0), (a1, b1), (a2, b2), (a3, b3) = consts
    p0, p1, p2, p3 = pool
    h = ((word ^ a0) * b0) & _M
    r = (_MIX_L * p0 - _MIX_R * (h ^ (h >> 16))) & _M
    p0 = r ^ (r >> 16)
    h = ((word ^ a1) * b1) & _M
    r = (_MIX_L * p1 - _MIX_R * (h ^ (h >> 16))) & _M
    p1 = r ^ (r >> 16)
    h = ((word ^ a2) * b2) & _M
    r = (_MIX_L * p2 - _MIX_R * (h ^ (h >> 16))) & _M
    p2 = r ^ (r >> 16)
    h = ((word ^ a3) * b3) & _M
    r = (_MIX_L * p3 - _MIX_R * (h ^ (h >> 16))) & _M
    p3 = r ^ (r >> 16)
    return p0, p1, p2, p3


def _words(seed: int, replica: int, stream_id: int, index: int) -> np.ndarray:
    pool = _pools.get((seed, replica, stream_id))
    if pool is None:
        if len(_pools) > 256:
            _pools.clear()
        before = _pools.get((seed, replica))
        if before is None:
            before = _pools[(seed, replica)] = _mix(_seed_pool(seed), replica, _WORD[0])
        pool = _pools[(seed, replica, stream_id)] = _mix(before, stream_id, _WORD[1])
    p0, p1, p2, p3 = _mix(pool, index, _WORD[2])
    # the eight output words, paired little-endian into the four 64-bit words of the key
    (a0, b0), (a1, b1), (a2, b2), (a3, b3), (a4, b4), (a5, b5), (a6, b6), (a7, b7) = _OUT
    v0, v1 = ((p0 ^ a0) * b0) & _M, ((p1 ^ a1) * b1) & _M
    v2, v3 = ((p2 ^ a2) * b2) & _M, ((p3 ^ a3) * b3) & _M
    v4, v5 = ((p0 ^ a4) * b4) & _M, ((p1 ^ a5) * b5) & _M
    v6, v7 = ((p2 ^ a6) * b6) & _M, ((p3 ^ a7) * b7) & _M
    return np.array(
        [
            (v0 ^ (v0 >> 16)) | (v1 ^ (v1 >> 16)) << 32,
            (v2 ^ (v2 >> 16)) | (v3 ^ (v3 >> 16)) << 32,
            (v4 ^ (v4 >> 16)) | (v5 ^ (v5 >> 16)) << 32,
            (v6 ^ (v6 >> 16)) | (v7 ^ (v7 >> 16)) << 32,
        ],
        dtype=np.uint64,
    )


class _Key(ISeedSequence):
    """The 4 words PCG64 seeds itself with (what SeedSequence.generate_state gives)."""

    __slots__ = ("words",)

    def __init__(self, words: np.ndarray):
        self.words = words

    def generate_state(self, n_words: int, dtype=np.uint32) -> np.ndarray:
        assert n_words == 4 and dtype == np.uint64, "a PCG64 key"
        return self.words


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
