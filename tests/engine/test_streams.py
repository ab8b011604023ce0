"""The replica's random streams: `stream` computes numpy's SeedSequence key itself (a fast
path); the generators must be the very ones numpy's SeedSequence would seed."""

from __future__ import annotations

import random

import numpy as np
import pytest

from sim.engine.streams import STREAMS, stream


def numpy_stream(seed: int, replica: int, name: str, index: int) -> np.random.Generator:
    sequence = np.random.SeedSequence(seed, spawn_key=(replica, STREAMS[name], index))
    return np.random.Generator(np.random.PCG64(sequence))


@pytest.mark.parametrize("bits", [1, 16, 32, 33, 64, 100, 128, 130])
def test_streams_are_numpy_seed_sequences(bits):
    draw = random.Random(bits)
    for _ in range(60):
        seed = draw.getrandbits(bits)
        replica = draw.choice([0, 1, draw.getrandbits(20), 2**32 - 1, 2**32, 2**40])
        name = draw.choice(list(STREAMS))
        index = draw.choice([0, 1, 2, draw.getrandbits(8)])
        ours = stream(seed, replica, name, index).random(5)
        theirs = numpy_stream(seed, replica, name, index).random(5)
        assert ours.tolist() == theirs.tolist(), (seed, replica, name, index)


def test_a_replicas_streams_do_not_depend_on_the_order_they_are_made():
    first = [stream(7, 3, "failure_lifetimes", i).random() for i in range(4)]
    stream(8, 9, "lemons")  # another seed and replica in between
    again = [stream(7, 3, "failure_lifetimes", i).random() for i in reversed(range(4))]
    assert first == again[::-1]
