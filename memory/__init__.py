"""Memory systems behind one protocol, the embedder and its cache, the FAISS store, the registry."""

from __future__ import annotations

from memsim.memory.base import Memory, MemoryStats, MemorySystem, Retrieved, Turn, render_turn
from memsim.memory.embed import Embedder, HashEmbedder
from memsim.memory.registry import (
    Resources,
    SystemSpec,
    UnknownSystemError,
    build_memory,
    memory_names,
    parse_system,
    register_memory,
)

__all__ = [
    "Turn",
    "Memory",
    "Retrieved",
    "MemoryStats",
    "MemorySystem",
    "render_turn",
    "Embedder",
    "HashEmbedder",
    "Resources",
    "SystemSpec",
    "UnknownSystemError",
    "build_memory",
    "memory_names",
    "parse_system",
    "register_memory",
]
