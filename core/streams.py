"""The named random streams of a run, all derived from its seed here and nowhere else.

A stream is named for what draws from it (``scenario``, ``systems``,
``stats``, ...). Its generator is seeded by the run's seed and a stable hash
of the name (``numpy.random.SeedSequence(seed, spawn_key=(crc32(name),))``),
so a stream's draws depend on the seed and its name only: adding a stream, or
drawing more from one, never shifts another.

Every other generator memsim makes is derived here too, by the functions
below: a child of a named stream (``substream``), a per-label stream of the
engine and the load model (``labelled``), a child drawn from a generator
(``spawn``, ``spawn_random``), a text generator keyed by a string
(``keyed_random``) and a generator seeded by given integers (``seeded``).
Nothing outside this module calls ``numpy.random.default_rng`` or
``random.Random`` (a test checks it).
"""

from __future__ import annotations

import hashlib
import random
import zlib
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

__all__ = ["Streams", "streams", "stream_key", "substream", "labelled", "spawn", "spawn_random", "keyed_random", "seeded"]


def stream_key(name: str) -> int:
    """The stable 32-bit key of a stream name (CRC-32 of its UTF-8 bytes, the same on every machine)."""
    return zlib.crc32(name.encode("utf-8"))


class Streams(Mapping[str, np.random.Generator]):
    """A run's random streams by name; ``streams["feedback"]`` is made on first use and then kept."""

    def __init__(self, seed: int) -> None:
        """Args:
        seed: the run's seed (a non-negative integer).

        Raises:
            ValueError: a negative seed.
        """
        if int(seed) < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        self.seed = int(seed)
        self._made: dict[str, np.random.Generator] = {}

    def __getitem__(self, name: str) -> np.random.Generator:
        if not isinstance(name, str) or not name:
            raise KeyError(name)
        rng = self._made.get(name)
        if rng is None:
            rng = self._made[name] = substream(self.seed, name)
        return rng

    def __iter__(self) -> Iterator[str]:
        return iter(self._made)

    def __len__(self) -> int:
        return len(self._made)

    def __repr__(self) -> str:
        return f"Streams(seed={self.seed}, made={sorted(self._made)})"


def streams(seed: int) -> Streams:
    """The named streams of a run with this seed (each generator starts at its beginning)."""
    return Streams(seed)


def substream(seed: int, *names: str) -> np.random.Generator:
    """The generator named by the path ``names`` under ``seed``: ``substream(s, "stats")`` is ``streams(s)["stats"]``
    at its beginning, and ``substream(s, "stats", x)`` a child of it keyed by ``x`` (drawing it moves no other)."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=tuple(stream_key(n) for n in names)))


def labelled(seed: int, label: str) -> np.random.Generator:
    """A generator keyed by ``label`` under ``seed`` (the first 8 bytes of the label's sha256), one per label.

    The engine's per-arm streams (feedback noise, fresh ids) and the load model's service times use it, so
    adding an arm leaves the others' draws alone.
    """
    key = int.from_bytes(hashlib.sha256(label.encode("utf-8")).digest()[:8], "big")
    return np.random.default_rng([int(seed), key])


def spawn(rng: np.random.Generator) -> np.random.Generator:
    """A child generator seeded by one draw of ``rng`` (a user's or a conversation's own stream, drawn in turn)."""
    return np.random.default_rng(rng.integers(2**63))


def spawn_random(rng: np.random.Generator) -> random.Random:
    """A ``random.Random`` seeded by one draw of ``rng`` (the world text's choices for one user)."""
    return random.Random(int(rng.integers(2**63)))


def keyed_random(key: str) -> random.Random:
    """A ``random.Random`` seeded by a string: the same key, the same choices, whatever was drawn before."""
    return random.Random(key)


def seeded(seed: int | Sequence[int]) -> np.random.Generator:
    """A generator seeded by the given integer(s): for draws keyed by a count or a version, not by a run's seed."""
    return np.random.default_rng(int(seed) if isinstance(seed, (int, np.integer)) else [int(s) for s in seed])
