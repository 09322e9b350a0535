"""Explicit registry of memory systems: name -> factory, with recorded args.

Factories are named by ``"module:attribute"`` strings and imported only when
a system is built, so optional dependencies cost nothing until used. A system
is ``name + args``; the args are JSON-serialisable and go into a run's spec,
so ``build_memory(spec.name, spec.args, ...)`` rebuilds it.

Systems from outside memsim need no edit here. A name may be an import path
(``package.module:Class``), recorded as such in the spec, or the name of an
entry point in the ``memsim.systems`` group of an installed package; either
is resolved on first use, in whatever process (a sweep worker, a Dask worker,
``memsim serve``) reads the spec.

memsim's own systems register where they are defined: each module of
``BUILTIN_MODULES`` ends with a ``REGISTRATIONS`` table of ``Registration``
entries next to its classes. The registry imports those modules (in that
order, which is the order of registration) the first time a system is looked
up, listed or registered, so importing this module imports none of them.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from memsim.core.registry import Entry, Registry, caller_origin
from memsim.memory.registration import Registration
from memsim.memory.resources import Resources

if TYPE_CHECKING:
    from memsim.memory.base import MemorySystem

__all__ = [
    "BUILTIN_MODULES",
    "ENTRY_POINT_GROUP",
    "Registration",
    "Resources",
    "SystemSpec",
    "UnknownSystemError",
    "register_memory",
    "check_system_args",
    "memory_names",
    "memory_description",
    "learns_from_feedback",
    "ROLES",
    "memory_role",
    "memory_target",
    "missing_extra",
    "build_memory",
    "parse_system",
]


class UnknownSystemError(ValueError):
    """Raised for a system name the registry does not know."""


@dataclass(frozen=True, slots=True)
class SystemSpec:
    """A system under test: the one type from ``--system NAME:k=v`` (``parse_system``) to a run's ``spec.json``.

    A run records each system with its ``label`` set to its ``display`` (``memsim.sim.spec.system_entries``), so the
    key of its rows never changes with how the label was derived; in a spec it is validated like a pydantic model
    (unknown keys are errors).
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    name: str
    """Registered name of the factory."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """JSON-serialisable constructor arguments."""
    label: str = ""
    """Display name in tables (defaults to ``name``, or ``name[args]``)."""

    @property
    def display(self) -> str:
        """The label shown in tables and used as the system key in rows."""
        if self.label:
            return self.label
        if not self.args:
            return self.name
        inner = ",".join(f"{k}={_fmt(v)}" for k, v in sorted(self.args.items()))
        return f"{self.name}[{inner}]"

    def to_json(self) -> dict[str, Any]:
        """The spec as plain JSON data."""
        return {"name": self.name, "args": dict(self.args), "label": self.display}


def _fmt(v: Any) -> str:
    return json.dumps(v) if not isinstance(v, str) else v


ROLES = ("baseline", "system", "ablation", "instrument")
"""What a registered system is for: a reference point, a system to compare, one mechanism switched off, a known effect."""


@dataclass(frozen=True, slots=True)
class _Entry:
    target: str
    description: str
    defaults: Mapping[str, Any]
    standalone: bool
    learns: bool | None
    role: str
    requires: tuple[str, str] | None = None
    """(module, extra): the optional module the system imports and the extra that installs it."""


ENTRY_POINT_GROUP = "memsim.systems"
"""The entry-point group an installed package names its systems in (``name = "package.module:Class"``)."""


BUILTIN_MODULES: tuple[str, ...] = (
    "memsim.memory.naive",
    "memsim.memory.gated",
    "memsim.memory.neuroplastic_published",
    "memsim.memory.neuroplastic",
    "memsim.memory.fullcontext",
    "memsim.memory.lexical",
    "memsim.memory.variants",
    "memsim.memory.http",
    "memsim.memory.mem0",
    "memsim.memory.controls",
    "memsim.memory.inject",
)
"""The modules whose ``REGISTRATIONS`` are memsim's own systems, in registration order.

Each is imported the first time a system is looked up or listed, so each keeps its heavy imports (torch, FAISS,
spaCy, mem0, polars, ...) inside the functions that need them: ``memsim list`` imports every one of them."""

_BUILTINS_LOCK = threading.RLock()
_builtins = {"loaded": False, "loading": False}


def _load_builtins() -> None:
    """Register the ``REGISTRATIONS`` of ``BUILTIN_MODULES``, once per process (a no-op while they are being read)."""
    if _builtins["loaded"]:
        return
    with _BUILTINS_LOCK:
        if _builtins["loaded"] or _builtins["loading"]:
            return
        _builtins["loading"] = True
        try:
            listed: list[tuple[str, Registration]] = []
            for module in map(importlib.import_module, BUILTIN_MODULES):
                for r in module.REGISTRATIONS:
                    attr = r.factory.__name__
                    if getattr(module, attr, None) is not r.factory:
                        raise ValueError(f"memory system {r.name!r}: {module.__name__} has no {attr} to build it with")
                    listed.append((f"{module.__name__}:{attr}", r))
            for target, r in listed:
                _add(r.name, target, r.description, r.defaults, r.standalone, r.learns, r.role, r.requires, "memsim")
            _builtins["loaded"] = True
        finally:
            _builtins["loading"] = False


class _Systems(Registry):
    """The generic registry, with memsim's own systems registered before anything reads or adds a name."""

    def register(self, name: str, target: Any, *, description: str, origin: str | None = None, **meta: Any) -> None:
        _load_builtins()
        super().register(name, target, description=description, origin=origin or caller_origin(1), **meta)

    def unregister(self, name: str) -> None:
        _load_builtins()
        super().unregister(name)

    def registered_entry(self, name: str) -> Entry | None:
        _load_builtins()
        return super().registered_entry(name)

    def registered(self) -> list[str]:
        _load_builtins()
        return super().registered()

    def entry_points(self) -> dict[str, importlib.metadata.EntryPoint]:
        _load_builtins()
        return super().entry_points()

    def __contains__(self, name: object) -> bool:
        _load_builtins()
        return super().__contains__(name)

    def entry(self, name: str, *, where: str = "") -> Entry:
        _load_builtins()
        return super().entry(name, where=where)


SYSTEMS: Registry = _Systems("memory system", plural="systems", group=ENTRY_POINT_GROUP)
"""Registered systems (``memsim.core.registry``); each entry's ``meta["entry"]`` holds what a system is built with.
Entry points and ``module:attr`` names are resolved by ``_entry`` below (their arguments are checked against the
factory's signature). Reading it first registers memsim's own systems (``BUILTIN_MODULES``)."""


class _Registered(Mapping[str, _Entry]):
    """The registered systems' entries, read from ``SYSTEMS``."""

    def __getitem__(self, name: str) -> _Entry:
        got = SYSTEMS.registered_entry(name)
        if got is None:
            raise KeyError(name)
        return got.meta["entry"]  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(SYSTEMS.registered())

    def __len__(self) -> int:
        return len(SYSTEMS.registered())


_REGISTRY: Mapping[str, _Entry] = _Registered()
_PLUGINS: dict[str, _Entry] = {}
"""Import paths and entry points resolved so far (kept apart: they are not registered names)."""


def register_memory(
    name: str,
    target: str,
    *,
    description: str,
    defaults: Mapping[str, Any] | None = None,
    standalone: bool = True,
    learns: bool | None = True,
    role: str = "system",
    requires: tuple[str, str] | None = None,
) -> None:
    """Register ``target`` (``"module:callable"``) under ``name``.

    The callable is called as ``factory(resources=Resources, **args)``.
    ``defaults`` are merged under the user's args (used for aliases such as
    ablations). ``standalone=False`` marks systems that cannot be built
    without user-given arguments (a model path, an inner system); the demo
    leaves them out. ``learns=False`` declares that ``feedback`` is a no-op
    (the run then plays no twin for it: its gain from use is zero by
    construction); ``None`` means "as the factory's ``learns_from_args(args)``"
    where it has one, else "as its ``inner`` system". ``role`` is one of
    ``ROLES``: the demo plays the baselines and systems, never the ablations
    or instruments. ``requires=(module, extra)`` names an optional module the
    system needs and the extra that installs it: where the module is absent the
    system is not standalone (the demo leaves it out and says which extra to
    install). A duplicate name is an error (memsim's own systems are registered
    first, so none of theirs can be taken).
    """
    _load_builtins()
    _add(name, target, description, defaults, standalone, learns, role, requires, caller_origin(1))


def _add(
    name: str,
    target: str,
    description: str,
    defaults: Mapping[str, Any] | None,
    standalone: bool,
    learns: bool | None,
    role: str,
    requires: tuple[str, str] | None,
    origin: str,
) -> None:
    if ":" not in target:
        raise ValueError(f"target {target!r} must look like 'module:attribute'")
    if role not in ROLES:
        raise ValueError(f"memory system {name!r}: role {role!r} is not one of {', '.join(ROLES)}")
    entry = _Entry(target, description, dict(defaults or {}), standalone, learns, role, requires)
    SYSTEMS.register(name, target, description=description, origin=origin, entry=entry)


def unregister_memory(name: str) -> None:
    """Remove a registered system (a test undoes its registration with it)."""
    SYSTEMS.unregister(name)


def learns_from_feedback(name: str, args: Mapping[str, Any] | None = None) -> bool:
    """Whether system ``name`` (with ``args``) can change through feedback, so that a twin is worth playing."""
    entry = _entry(name)
    if entry.learns is not None:
        return entry.learns
    merged = {**entry.defaults, **dict(args or {})}
    asks = getattr(_load(entry.target, name), "learns_from_args", None)
    if callable(asks):  # an outside system says for itself (e.g. a server's describe)
        return bool(asks(merged))
    inner = str(merged.get("inner", "naive"))
    inner_name, _, _ = inner.partition(":")
    return learns_from_feedback(inner_name)


def memory_names(*, standalone_only: bool = False) -> list[str]:
    """Registered and entry-point names, sorted; with ``standalone_only``, the registered ones buildable without arguments.

    Entry-point systems are left out of ``standalone_only`` (the demo's list): listing them imports nothing,
    and a run plays them only when named.
    """
    names = {n for n, e in _REGISTRY.items() if not standalone_only or (e.standalone and missing_extra(n) is None)}
    if not standalone_only:
        names |= set(_entry_points())
    return sorted(names)


def missing_extra(name: str) -> str | None:
    """The extra to install for system ``name`` when a module it needs is absent (``"nlp"``), else None."""
    needs = _entry(name).requires
    if needs is None or importlib.util.find_spec(needs[0]) is not None:
        return None
    return needs[1]


def memory_role(name: str) -> str:
    """What registered system ``name`` is for (one of ``ROLES``)."""
    return _entry(name).role


def memory_description(name: str) -> str:
    """One-line description of a registered system."""
    return _entry(name).description


def memory_target(name: str) -> str:
    """The ``module:attribute`` that system ``name`` is built from (its import path for a plugin)."""
    return _entry(name).target


def _is_import_path(text: str) -> bool:
    """Whether ``text`` reads ``package.module:Attribute`` (not ``name:key=value``)."""
    module, sep, attr = text.partition(":")
    return bool(sep) and attr.isidentifier() and all(part.isidentifier() for part in module.split("."))


def _entry_points() -> dict[str, str]:
    """Installed packages' systems: entry-point name -> ``module:attribute`` (read anew, so a fresh install is seen)."""
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def memory_origin(name: str) -> str:
    """Where system ``name`` comes from: ``memsim`` (or the module that registered it), ``entry point
    (module:attr)``, or ``module:attr`` named directly."""
    if name in _REGISTRY:
        return SYSTEMS.origin(name)
    points = _entry_points()
    if name in points:
        return f"entry point ({points[name]})"
    return "named as module:attr" if _is_import_path(name) else "unknown"


def _entry(name: str) -> _Entry:
    entry = _REGISTRY.get(name) or _PLUGINS.get(name)
    if entry is not None:
        return entry
    target = _entry_points().get(name) or (name if _is_import_path(name) else None)
    if target is None:
        known = memory_names()
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UnknownSystemError(
            f"unknown memory system {name!r}; {hint}known systems: {', '.join(known)} "
            f"(or package.module:Class, or an entry point in group {ENTRY_POINT_GROUP!r})"
        )
    factory = _load(target, name)
    if not callable(factory):
        raise UnknownSystemError(f"memory system {name!r}: {target} is not a class or a function that makes a "
                                 f"system (it is of type {type(factory).__name__})")
    # A plugin says whether it learns: ``learns_from_args(args)`` or a ``learns`` attribute; by default it
    # is taken to learn, so that the run plays its twin and placebo rather than assume a zero gain.
    learns = None if callable(getattr(factory, "learns_from_args", None)) else bool(getattr(factory, "learns", True))
    doc = (inspect.getdoc(factory) or "").strip().splitlines()
    entry = _Entry(target, doc[0] if doc else f"plugged in from {target}", {}, False, learns, "system")
    _PLUGINS[name] = entry
    return entry


def _load(target: str, name: str) -> Any:
    """The factory named by ``target``; an import that fails is an unknown system, with the reason."""
    module_name, attr = target.split(":", 1)
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        if name in _REGISTRY:  # a registered system's optional dependency: the error names it as it is
            raise
        raise UnknownSystemError(f"memory system {name!r}: cannot import {target}: {exc}") from None


def build_memory(
    name: str, args: Mapping[str, Any] | None = None, *, resources: Resources | None = None
) -> MemorySystem:
    """Build the registered system ``name`` with ``args``."""
    entry = _entry(name)
    factory = _load(entry.target, name)
    merged = {**entry.defaults, **dict(args or {})}
    resources = resources or Resources()
    if resources.builder is None:  # wrappers build their inner system through it (no import of this module)
        resources.builder = build_memory
    try:
        return factory(resources=resources, **merged)
    except TypeError as exc:
        raise ValueError(f"bad arguments for memory system {name!r}: {exc}") from exc


def check_system_args(name: str, args: Mapping[str, Any] | None = None) -> None:
    """Check ``args`` against the constructor of system ``name`` before any work is done.

    Every key must be a keyword of the constructor (``resources`` aside) and
    every value must fit its annotation (``ltp=maybe`` for a ``bool`` is an
    error). Raises ``ValueError`` naming the system, the key and what it takes.
    """
    import typing

    from pydantic import TypeAdapter, ValidationError

    entry = _entry(name)
    factory = _load(entry.target, name)
    init = factory.__init__ if inspect.isclass(factory) else factory
    params = {
        n: p for n, p in inspect.signature(init).parameters.items()
        if n not in ("self", "resources") and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    open_ended = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(init).parameters.values())
    namespace = {**vars(typing), **vars(importlib.import_module(factory.__module__))}
    hints: dict[str, Any] = {}
    for n, p in params.items():
        try:  # annotations are strings under ``from __future__ import annotations``
            hints[n] = eval(p.annotation, namespace) if isinstance(p.annotation, str) else p.annotation  # noqa: S307
        except Exception:  # an annotation that cannot be resolved here is left unchecked
            continue
        if hints[n] is inspect.Parameter.empty:
            del hints[n]
    for key, value in {**entry.defaults, **dict(args or {})}.items():
        if key not in params:
            if open_ended:
                continue
            known = ", ".join(sorted(params)) or "none"
            raise ValueError(f"memory system {name!r} has no argument {key!r}; its arguments: {known}")
        hint = hints.get(key)
        if hint is None:
            continue
        try:
            TypeAdapter(hint).validate_python(value, strict=isinstance(value, str) and hint is not str)
        except ValidationError:
            kind = getattr(hint, "__name__", str(hint))
            raise ValueError(f"memory system {name!r}: argument {key}={value!r} is not a valid {kind}") from None


def parse_system(text: str) -> SystemSpec:
    """Parse a command-line system: ``name[:key=value,...]`` or ``package.module:Class[:key=value,...]``.

    ``name`` is a registered system or an entry point of group
    ``memsim.systems``. Values are read as JSON where they parse (numbers,
    true/false), else as strings. ``label=TEXT`` (any system) names the
    system in tables instead of ``name[args]``. The name is checked against
    the registry and the args against the constructor.
    """
    parts = text.split(":", 2)
    points = _entry_points()
    known = parts[0] in _REGISTRY or parts[0] in points  # a known name wins: ``naive:oops`` is a bad argument
    if len(parts) > 1 and not known and _is_import_path(f"{parts[0]}:{parts[1]}"):
        name, rest = f"{parts[0]}:{parts[1]}", parts[2] if len(parts) > 2 else ""
    else:
        name, _, rest = text.partition(":")
    label = ""
    if name not in _REGISTRY and name in points:
        # The spec records the import path, so a rerun or a worker rebuilds it even where the entry point is not installed.
        name, label = points[name], name
    _entry(name)
    args: dict[str, Any] = {}
    if rest:
        for part in rest.split(","):
            key, eq, raw = part.partition("=")
            if not eq or not key:
                raise ValueError(f"bad system argument {part!r} in {text!r}; expected key=value")
            try:
                args[key.strip()] = json.loads(raw)
            except json.JSONDecodeError:
                args[key.strip()] = raw
    label = args.pop("label", label)
    check_system_args(name, args)
    return SystemSpec(name=name, args=args, label=str(label))
