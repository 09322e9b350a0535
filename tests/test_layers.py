"""The layers of memsim: who may import whom, one top-level package, no reaching into private names."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Lowest first. core is the named bottom every layer may import; analysis.cli, the commands, sits on top.
_LAYERS = ("core", "memory", "sim", "static_benchmarks", "scenarios", "analysis", "analysis.cli")


def _layer(module: str) -> int | None:
    """The layer of a memsim module (its longest matching prefix), None outside memsim."""
    if not module.startswith("memsim."):
        return None
    name = module[len("memsim."):]
    best = None
    for i, layer in enumerate(_LAYERS):
        if name == layer or name.startswith(layer + "."):
            if best is None or len(layer) > len(_LAYERS[best]):
                best = i
    return best


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["memsim", *parts])


def _imports(path: Path) -> list[tuple[str, int]]:
    """Modules a file imports, with the line: import statements at any depth and lazy ``"module:attr"`` targets."""
    out: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, node.lineno))
            out.extend((f"{node.module}.{a.name}", node.lineno) for a in node.names if node.module.startswith("memsim"))
        elif isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("memsim."):
            target = node.value.split(":")[0]
            if target.replace(".", "").replace("_", "").isalnum():
                out.append((target, node.lineno))
    return out


def _source_files() -> list[Path]:
    return [p for top in ("core", "sim", "memory", "static_benchmarks", "scenarios", "analysis") for p in (REPO / top).rglob("*.py")]


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    bad = []
    for path in _source_files():
        here = _layer(_module_of(path))
        for module, line in _imports(path):
            there = _layer(module)
            if there is not None and there > here:
                bad.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


def test_the_bottom_layer_imports_nothing_above_it():
    for path in (REPO / "core").rglob("*.py"):
        for module, line in _imports(path):
            assert _layer(module) in (None, 0), f"{path.relative_to(REPO)}:{line} imports {module}"


def test_runner_does_not_import_analysis_and_help_imports_nothing_heavy():
    code = (
        "import sys; from memsim.analysis.cli import build_parser; build_parser(['--help'])\n"
        "import memsim.sim.runner\n"
        "heavy = [m for m in ('memsim.analysis.summary', 'memsim.analysis.stats', 'torch', 'sentence_transformers', 'llama_cpp') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == ""
    code = "import sys; from memsim.analysis.cli import build_parser; build_parser(['--help']); print('simpy' in sys.modules, 'polars' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False False"


def _memsim_module_names(tree: ast.AST) -> set[str]:
    """Local names that a file binds to memsim modules (``import memsim.x as y``, ``from memsim.x import mod``)."""
    modules = {_module_of(p) for p in _source_files()}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.asname for a in node.names if a.asname and a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(a.asname or a.name for a in node.names if f"{node.module}.{a.name}" in modules)
    return names


def test_no_module_reaches_into_another_modules_private_names():
    bad = []
    for path in _source_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        mods = _memsim_module_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memsim"):
                bad += [f"{path.relative_to(REPO)}:{node.lineno} imports {node.module}.{a.name}"
                        for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in mods
                  and node.attr.startswith("_") and not node.attr.startswith("__")):
                bad.append(f"{path.relative_to(REPO)}:{node.lineno} reads {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_the_wheel_holds_one_top_level_package(tmp_path: Path):
    # A copy of the checkout: setuptools' build/ folder would carry stale modules into the wheel.
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "site", "__pycache__", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)],
        check=True, capture_output=True, text=True,
    )
    (wheel,) = tmp_path.glob("memsim-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"memsim"}, tops
    for needed in ("memsim/__main__.py", "memsim/core/errors.py", "memsim/analysis/cli/__init__.py",
                   "memsim/scenarios/configs/demo.toml", "memsim/memory/http_openapi.json"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith("memsim/tests/")]
    packages = {str(p.parent.relative_to(REPO)) for p in _source_files() if p.name == "__init__.py"}
    shipped = {n.rsplit("/", 1)[0].removeprefix("memsim/") for n in names if n.endswith("/__init__.py")}
    assert packages <= shipped, f"packages missing from the wheel (list them in pyproject.toml): {packages - shipped}"


def test_no_import_circle():
    """Imports at any depth (function level, TYPE_CHECKING) and lazy ``"module:attr"`` targets form no circle."""
    modules = {_module_of(p): p for p in _source_files()}

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges = set()
        for target, _ in _imports(path):
            found = known(target)
            # a package's __init__ and its own modules are not partners in a circle
            if found and found != module and not module.startswith(found + ".") and not found.startswith(module + "."):
                edges.add(found)
        graph[module] = edges
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> None:
        if node in trail:
            raise AssertionError("import circle: " + " -> ".join(trail[trail.index(node):] + [node]))
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, [*trail, node])
        done.add(node)

    for module in sorted(graph):
        visit(module, [])


def test_no_two_top_level_folders_import_each_other():
    """Folder by folder (``core``, ``memory``, ``sim``, ...): the imports between them run one way only."""
    folders: dict[str, set[str]] = {}
    for path in _source_files():
        here = path.relative_to(REPO).parts[0]
        for module, _ in _imports(path):
            parts = module.split(".")
            if parts[0] == "memsim" and len(parts) > 1 and parts[1] and (REPO / parts[1]).is_dir() and parts[1] != here:
                folders.setdefault(here, set()).add(parts[1])
    both = sorted(f"{a} <-> {b}" for a, out in folders.items() for b in out if a < b and a in folders.get(b, set()))
    assert not both, both
    assert folders.get("core", set()) == set() and folders["memory"] == {"core"}


def test_argparse_lives_only_in_the_command_layer():
    """Library modules take typed arguments; only ``analysis/cli/`` parses a command line."""
    found = [f"{p.relative_to(REPO)}:{line}" for p in _source_files() if "cli" not in p.relative_to(REPO).parts
             for module, line in _imports(p) if module == "argparse"]
    assert not found, found


def test_random_generators_are_derived_only_in_core_streams():
    """Every generator comes from ``memsim.core.streams``: no other module seeds numpy's or Python's own."""
    makers = {"default_rng", "SeedSequence", "Random", "RandomState", "seed"}
    found = []
    for p in _source_files():
        if p.relative_to(REPO).as_posix() == "core/streams.py":
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in makers:
                base = ast.unparse(node.func.value)
                if base in ("np.random", "numpy.random", "random"):
                    found.append(f"{p.relative_to(REPO)}:{node.lineno} {base}.{node.func.attr}")
    assert not found, found


MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80


def test_files_and_functions_a_reader_can_hold():
    """No source file over 600 lines and no function over 80 (split by responsibility: docs/contributing.md)."""
    files = [*_source_files(), *(REPO / name for name in ("api.py", "__init__.py", "__main__.py"))]
    long_files = [f"{p.relative_to(REPO)}: {n} lines" for p in files
                  if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES]
    long_functions = []
    for p in files:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if n > MAX_FUNCTION_LINES:
                    long_functions.append(f"{p.relative_to(REPO)}:{node.lineno} {node.name}: {n} lines")
    assert not long_files and not long_functions, [*long_files, *long_functions]
