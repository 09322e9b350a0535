"""The named random streams of a run, all derived from its seed here and nowhere else.

A stream is named for what draws from it (``scenario``, ``systems``,
``stats``, ...). Its generator is seeded by the run's seed and a stable hash
of the name (``numpy.random.SeedSequence(seed, spawn_key=(crc32(name),))``),
so a stream's draws depend on the seed and its name only: adding a stream, or
drawing more from one, never shifts another.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping

import numpy as np

__all__ = ["Streams", "streams", "stream_key"]


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
            rng = self._made[name] = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(stream_key(name),)))
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
