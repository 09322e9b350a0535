"""What a system factory may need: the rng, the shared embedder, and (for wrappers) a builder of inner systems.

Below the registry: a wrapper asks ``resources.build`` for its inner system instead of importing the registry.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from memsim.core.streams import seeded

if TYPE_CHECKING:
    from memsim.memory.base import MemorySystem
    from memsim.memory.embed import Embedder

__all__ = ["Resources"]


@dataclass
class Resources:
    """Run-level things a factory may need, shared by every system of a run.

    The embedder is made on first use so that systems that need none (BM25,
    full context) do not load a model.
    """

    rng: np.random.Generator = field(default_factory=lambda: seeded(0))
    """The run's random source (systems spawn children from it)."""
    embedder_factory: Callable[[], Embedder] | None = None
    """Makes the shared embedder; default: the packaged all-MiniLM-L6-v2."""
    builder: Callable[..., MemorySystem] | None = None
    """``builder(name, args, resources=...)``: the registry's ``build_memory``, set by it when it hands these out."""
    _embedder: Embedder | None = None
    _parent: Resources | None = None

    def fork(self) -> Resources:
        """The same embedder, with a copy of the rng in its current state.

        A twin built from a fork made just before its system was built gets
        exactly the random draws that system got.
        """
        return Resources(rng=copy.deepcopy(self.rng), builder=self.builder, _parent=self._parent or self)

    def at(self, rng: np.random.Generator) -> Resources:
        """The same embedder with a copy of ``rng``: a system rebuilt apart from the run's others (one arm played
        in a worker) gets, from the state its build began with, exactly the draws it got among them."""
        return Resources(rng=copy.deepcopy(rng), builder=self.builder, _parent=self._parent or self)

    def build(self, name: str, args: Mapping[str, Any] | None = None) -> MemorySystem:
        """Build the registered system ``name`` with ``args`` on these resources (a wrapper's inner system)."""
        if self.builder is None:
            raise ValueError(
                f"cannot build inner system {name!r}: build the wrapper with build_memory, or give Resources(builder=build_memory)"
            )
        return self.builder(name, dict(args or {}), resources=self)

    @property
    def made_embedder(self) -> Embedder | None:
        """The shared embedder if something already made it, else None (loads nothing)."""
        return self._parent.made_embedder if self._parent is not None else self._embedder

    @property
    def embedder(self) -> Embedder:
        """The shared embedder, made once."""
        if self._parent is not None:
            return self._parent.embedder
        if self._embedder is None:
            if self.embedder_factory is not None:
                self._embedder = self.embedder_factory()
            else:
                from memsim.memory.embed import Embedder

                self._embedder = Embedder()
        return self._embedder
