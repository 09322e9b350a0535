"""One registry type for every kind memsim builds by name: scenarios, static benchmarks, scorers, judges, systems.

A ``Registry`` maps a name to a target: the object itself (a class, a
factory, a protocol record) or a lazy ``"module:attr"`` string, imported
when first used. Each entry has one line of description, free metadata and
an origin (``memsim``, or the module or package that added it). A kind's
entry-point group (``memsim.scenarios``, ``memsim.scorers``, ...) lets a
user's package add entries without touching memsim: they are listed without
being imported, and imported when one is used. A duplicate name is an error
(a built-in never shadowed silently); an unknown name is one ``UserError``
that lists the known names and suggests the closest.

Each kind registers where it is defined (``memsim.sim.scorers`` registers
its scorers in its own module), so a new benchmark, scorer or judge is one
module and one ``register`` call.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from memsim.core.errors import UserError

__all__ = ["Entry", "Registry", "load_target", "caller_origin"]


def caller_origin(depth: int = 1) -> str:
    """``memsim`` when the code ``depth`` frames above the caller is memsim's, else that code's module name.

    A kind's own ``register_...`` function passes ``caller_origin(2)``: the module that called it.
    """
    module = sys._getframe(depth + 1).f_globals.get("__name__", "")
    return "memsim" if module == "memsim" or module.startswith("memsim.") else (module or "unknown")


def load_target(target: str) -> Any:
    """The object a ``"module:attr"`` string names (``attr`` may be dotted)."""
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True, slots=True)
class Entry:
    """One registered name."""

    name: str
    target: Any
    """The object, or ``"module:attr"`` to import when first used."""
    description: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    """What the kind keeps beside it (an LLM judge's ``llm``, a system's defaults, ...)."""
    origin: str = "memsim"
    """``memsim`` for memsim's own entries, else the module that registered it or ``entry point <dist>``."""


class Registry:
    """Names of one kind, each to a target (see the module docstring).

    Args:
        kind: the singular noun messages use (``scorer``).
        plural: the plural (default ``kind + "s"``).
        group: the entry-point group a user's package adds entries through (``memsim.scorers``).
        ordered: list names in registration order (default: sorted).
    """

    def __init__(self, kind: str, *, plural: str | None = None, group: str | None = None, ordered: bool = False) -> None:
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self.group = group
        self.ordered = ordered
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, target: Any, *, description: str, origin: str | None = None, **meta: Any) -> None:
        """Add ``name``; a duplicate, an empty name or a string target that is not ``"module:attr"`` is a ``ValueError``."""
        if not name or not isinstance(name, str):
            raise ValueError(f"a {self.kind} needs a non-empty name, got {name!r}")
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered (by {self._entries[name].origin})")
        if isinstance(target, str) and ":" not in target:
            raise ValueError(f"target {target!r} must look like 'module:attribute'")
        self._entries[name] = Entry(name, target, description, dict(meta), origin or caller_origin(1))

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a test undoes its registration with it)."""
        del self._entries[name]

    def registered_entry(self, name: str) -> Entry | None:
        """The entry registered in this process under ``name``, or None (entry points are not looked at)."""
        return self._entries.get(name)

    def registered(self) -> list[str]:
        """The names registered in this process (entry points left out)."""
        return list(self._entries) if self.ordered else sorted(self._entries)

    def entry_points(self) -> dict[str, importlib.metadata.EntryPoint]:
        """The kind's installed entry points by name (none imported); a registered name wins over one."""
        if self.group is None:
            return {}
        return {ep.name: ep for ep in importlib.metadata.entry_points(group=self.group) if ep.name not in self._entries}

    def names(self) -> list[str]:
        """Every name: registered, then those installed packages add through the entry-point group."""
        extra = sorted(self.entry_points())
        return [*self.registered(), *extra]

    def __contains__(self, name: object) -> bool:
        return name in self._entries or (isinstance(name, str) and name in self.entry_points())

    def __iter__(self) -> Iterator[Entry]:
        return (self.entry(n) for n in self.names())

    def entry(self, name: str, *, where: str = "") -> Entry:
        """The entry of ``name`` (an entry point's is read, not imported).

        Raises:
            UserError: unknown ``name``; the message lists the known names and suggests the closest.
        """
        got = self._entries.get(name)
        if got is not None:
            return got
        ep = self.entry_points().get(name)
        if ep is not None:
            dist = getattr(getattr(ep, "dist", None), "name", None) or "an installed package"
            return Entry(name, ep.value, f"from {dist} ({ep.value})", {}, f"entry point of {dist}")
        raise UserError(self.unknown(name, where=where))

    def unknown(self, name: str, *, where: str = "") -> str:
        """The message for an unknown ``name``: the known ones, and the closest as a suggestion."""
        known = self.names()
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        at = f" in {where}" if where else ""
        return f"unknown {self.kind} {name!r}{at}{hint}; known {self.plural}: {', '.join(known)}"

    def load(self, name: str, *, where: str = "") -> Any:
        """The target of ``name``, imported if it is a ``"module:attr"`` string.

        Raises:
            UserError: unknown ``name``, or its target cannot be imported (the message names both).
        """
        target = self.entry(name, where=where).target
        if not isinstance(target, str):
            return target
        try:
            return load_target(target)
        except (ImportError, AttributeError) as exc:
            raise UserError(f"{self.kind} {name!r}: cannot load {target!r}: {exc}") from None

    def description(self, name: str) -> str:
        """One line of help for ``name``."""
        return self.entry(name).description

    def origin(self, name: str) -> str:
        """Where ``name`` comes from (``memsim``, a module, an entry point's package)."""
        return self.entry(name).origin

    def rows(self) -> list[tuple[str, str, str]]:
        """``(name, description, origin)`` of every name, for ``memsim list``."""
        return [(e.name, e.description, e.origin) for e in self]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} registered, group={self.group!r})"

