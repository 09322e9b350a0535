"""docs/contributing.md against the code: every file it names exists, every extension point it describes is real.

The guide tells a contributor where each kind of thing is added and how it
registers; a guide that names a moved file or a registration call that no
longer exists sends them the wrong way, so the guide is checked here.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "contributing.md"

REGISTRARS = {
    "register_memory": "memsim.memory.registry",
    "register_scenario": "memsim.scenarios.registry",
    "register_protocol": "memsim.scenarios.registry",
    "register_scorer": "memsim.sim.scorers",
    "register_judge": "memsim.sim.answer.judges",
    "register_dataset": "memsim.static_benchmarks.data",
    "register_kind": "memsim.static_benchmarks.data",
    "register_reader": "memsim.sim.answer.readers",
}
"""Each registration call a contributor may be told to write, and the module that defines it."""

REGISTRIES = {
    "memsim.memory.registry": "SYSTEMS",
    "memsim.scenarios.registry": ("SCENARIOS", "BENCHMARKS"),
    "memsim.sim.scorers": "SCORERS",
    "memsim.sim.answer.judges": "JUDGES",
    "memsim.sim.answer.readers": "READERS",
}
"""The registries of the kinds a user's package can add, each with its entry-point group."""


def _text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def test_every_file_the_guide_names_exists():
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.(?:py|toml|md|json))`", _text()))
    named |= {m for m in re.findall(r"`([a-z_]+\.(?:py|toml))`", _text())}
    assert named, "the guide names no file"
    missing = sorted(p for p in named if "<" not in p and not (REPO / p).exists())
    assert not missing, f"docs/contributing.md names files that do not exist: {missing}"


def test_every_registration_call_the_guide_names_exists():
    calls = set(re.findall(r"\b(register_[a-z_]+)\(", _text()))
    assert calls, "the guide names no registration call"
    unknown = sorted(c for c in calls if c not in REGISTRARS)
    assert not unknown, f"docs/contributing.md names registration calls memsim does not have: {unknown}"
    for call in calls:
        assert callable(getattr(importlib.import_module(REGISTRARS[call]), call, None)), call


def test_the_entry_point_groups_the_guide_names_are_the_registries_groups():
    groups = set()
    for module, names in REGISTRIES.items():
        for name in (names,) if isinstance(names, str) else names:
            groups.add(getattr(importlib.import_module(module), name).group)
    named = set(re.findall(r"`(memsim\.(?:systems|scenarios|benchmarks|scorers|judges|readers|datasets))`", _text()))
    assert named == groups, f"the guide names groups {sorted(named)}; the registries use {sorted(groups)}"


def test_every_memsim_name_the_guide_gives_resolves():
    """``memsim.x.y`` (a module) and ``memsim.x.y.Name`` / ``memsim.x.y:Name`` (a name in it) exist."""
    groups = {"memsim.systems", "memsim.scenarios", "memsim.benchmarks", "memsim.scorers", "memsim.judges", "memsim.readers"}
    dotted = set(re.findall(r"`(memsim(?:\.[a-z_]+)+(?:[.:][A-Za-z_]+)?)", _text())) - groups
    assert dotted, "the guide names no memsim module"
    broken = []
    for name in sorted(dotted):
        module, _, attr = name.replace(":", ".").rpartition(".")
        try:
            importlib.import_module(name.replace(":", "."))
            continue
        except ImportError:
            pass
        try:
            if not hasattr(importlib.import_module(module), attr):
                broken.append(name)
        except ImportError:
            broken.append(name)
    assert not broken, f"docs/contributing.md names what memsim does not have: {broken}"
