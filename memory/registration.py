"""How a module of memsim's own systems lists them: a ``REGISTRATIONS`` table of ``Registration`` entries.

Each module named in ``memsim.memory.registry.BUILTIN_MODULES`` ends with
such a table, next to the classes it registers; the registry reads the
tables the first time a system is looked up or listed. This module imports
nothing, so a system's module can list itself without importing the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Registration"]


@dataclass(frozen=True, slots=True)
class Registration:
    """One of memsim's own systems, as the module that defines it lists it in its ``REGISTRATIONS``.

    The fields are ``memsim.memory.registry.register_memory``'s; the target is
    ``"<the listing module>:<the factory's name>"``.
    """

    name: str
    """The registered name (``memsim list``)."""
    factory: Callable[..., Any]
    """The class (or function) the system is built with, defined or imported in the listing module."""
    description: str
    """One line for ``memsim list``."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Arguments merged under the user's (aliases such as ablations)."""
    standalone: bool = True
    """False where the system cannot be built without user-given arguments (the demo leaves it out)."""
    learns: bool | None = True
    """False where ``feedback`` is a no-op (no twin is played); None: as the factory or its inner system says."""
    role: str = "system"
    """One of ``memsim.memory.registry.ROLES``."""
    requires: tuple[str, str] | None = None
    """(module, extra): an optional module the system imports and the extra that installs it."""
