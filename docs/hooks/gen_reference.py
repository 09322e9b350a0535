"""Reference pages generated from the code when the site is built.

Registered under ``hooks:`` in ``mkdocs.yml``. Before the pages are read, this
module writes, in memory (nothing lands in the repository):

- ``reference/cli.md``: every command and subcommand, walked from
  ``memsim.analysis.cli.build_parser()``;
- ``reference/config.md``: every key of ``spec.json``, of a config file, of a
  sweep spec and of the scenarios, walked from the pydantic models and their
  field descriptions (or attribute docstrings);
- ``reference/run-folder.md``: the run folder's files and columns, from the
  recorder's schemas, the registered scorers and the summariser;
- ``reference/registries.md``: what ``memsim list`` prints.

It also serves figures that live beside the code (``analysis/figures/``) as
site files, so that they are not copied into ``docs/``, and checks that the
README stays a short front door whose links and commands exist. The pages follow the
code as it changes: a renamed anchor fails the build instead of going stale.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import inspect
import io
import os
import pkgutil
import re
import shutil
import sys
import tempfile
import textwrap
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (``docs/hooks/`` is two levels below it)."""

FIGURES = {"results/sensitivity.png": ROOT / "analysis" / "figures" / "sensitivity.png"}
"""Site path -> file in the repository, for figures the results pages show."""

GENERATED_NOTE = "*Generated from the code when the site is built; do not edit.*\n"


# --------------------------------------------------------------------------- helpers


def _cell(text: Any) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: Any) -> str:
    """Inline code fit for a table cell (backticks inside are dropped, paths of this machine made relative)."""
    if str(text) == "":
        return ""
    plain = str(text).replace(f"{ROOT}{os.sep}", "").replace(str(Path.home()), "~")
    return "`" + _cell(plain).replace("`", "") + "`"


# --------------------------------------------------------------------------- CLI


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand of ``parser``, in order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    """A table of a parser's own arguments (subcommand groups are listed apart)."""
    rows = []
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        name = ", ".join(action.option_strings) or (action.metavar or action.dest)
        value = ""
        if action.nargs != 0:
            value = action.metavar or ("{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper())
        default = action.default
        shown = "" if default in (None, False, argparse.SUPPRESS) or not action.option_strings else default
        if isinstance(action, argparse._AppendAction) and default == []:
            shown = ""
        help_text = formatter._expand_help(action) if action.help else ""
        rows.append(f"| {_code(name)} | {_code(value) if value else ''} | {_code(shown) if shown != '' else ''} | {_cell(help_text)} |")
    if not rows:
        return []
    return ["| argument | value | default | what it does |", "|---|---|---|---|", *rows, ""]


def _command_section(path: list[str], help_text: str, parser: argparse.ArgumentParser, out: list[str]) -> None:
    depth = min(len(path) + 1, 4)
    out.append(f"{'#' * depth} `{' '.join(path)}`\n")
    if help_text:
        out.append(f"{_cell(help_text)}\n")
    out.append("```text\n" + parser.format_usage().strip() + "\n```\n")
    out.extend(_options_table(parser))
    subs = list(_subparsers(parser))
    if subs:
        out.append("| subcommand | what it does |\n|---|---|")
        out.extend(f"| {_code(' '.join([*path, n]))} | {_cell(h)} |" for n, h, _ in subs)
        out.append("")
    for name, sub_help, sub in subs:
        _command_section([*path, name], sub_help, sub, out)


def cli_page() -> str:
    """Every command of ``memsim``, walked from its argument parsers."""
    from memsim.analysis.cli import build_parser

    parser = build_parser()
    out = ["# Command line\n", GENERATED_NOTE]
    out.append(
        "Every command and option of `memsim`, read from its argument parsers "
        "(`memsim.analysis.cli.build_parser()`); `memsim COMMAND --help` prints the same.\n"
    )
    out.append("## `memsim`\n")
    out.append("```text\n" + parser.format_usage().strip() + "\n```\n")
    out.extend(_options_table(parser))
    out.append("| command | what it does |\n|---|---|")
    subs = list(_subparsers(parser))
    out.extend(f"| [`memsim {n}`](#memsim-{n}) | {_cell(h)} |" for n, h, _ in subs)
    out.append("")
    for name, help_text, sub in subs:
        _command_section(["memsim", name], help_text, sub, out)
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- config keys


def attribute_docs(cls: type) -> dict[str, str]:
    """Docstrings written under a class's annotated attributes (``x: int = 0`` then ``\"\"\"...\"\"\"``)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass in (BaseModel, object) or not issubclass(klass, BaseModel):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:]):
            if (
                isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("collections.abc.", "")


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """Pydantic models named anywhere in a type annotation."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _default(field: Any) -> str:
    if field.default is not PydanticUndefined:
        value = field.default
    elif field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:  # a factory that takes the validated data
            return "(computed)"
    else:
        return "required"
    if isinstance(value, BaseModel):
        return f"{type(value).__name__}()"
    return repr(value)


def _model_section(model: type[BaseModel], title: str, out: list[str], seen: set[type[BaseModel]]) -> None:
    """A table of ``model``'s fields, then one for each model reachable from them (once each)."""
    seen.add(model)
    docs = attribute_docs(model)
    doc = inspect.getdoc(model) or ""
    out.append(f"### {title}\n")
    out.append(f"`{model.__module__}.{model.__qualname__}`" + (f": {_cell(doc.splitlines()[0])}" if doc else "") + "\n")
    out.append("| key | type | default | what it sets |\n|---|---|---|---|")
    nested: list[type[BaseModel]] = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        text = field.description or docs.get(name, "")
        out.append(f"| {_code(key)} | {_code(_type_name(field.annotation))} | {_code(_default(field))} | {_cell(text)} |")
        nested.extend(m for m in _models_in(field.annotation) if m not in seen and m not in nested)
    out.append("")
    for sub in nested:
        if sub not in seen:
            _model_section(sub, sub.__name__, out, seen)


def _scenario_models() -> Iterator[type[BaseModel]]:
    """The pydantic models defined in the scenario modules (their ``[scenario]`` keys), in module order."""
    import memsim.scenarios as package

    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == module.__name__:
                yield obj


def config_page() -> str:
    """Every key of a run spec, a config file, a sweep spec and the scenarios, from the pydantic models."""
    from memsim.analysis.sweep import SweepSpec
    from memsim.scenarios.config import RunConfig
    from memsim.sim.spec import RunSpec

    out = ["# Configuration keys\n", GENERATED_NOTE]
    out.append(
        "Each table is one pydantic model, read from its fields (type, default and description); "
        "every model a field names follows its parent. An unknown key is an error that names it.\n"
    )
    roots = [
        ("The run spec (`spec.json`)", RunSpec, "What a run folder's `spec.json` holds; `memsim rerun` plays it again."),
        ("A config file (`memsim run CONFIG.toml`)", RunConfig,
         "A TOML file with a `[scenario]` table (`name` plus the scenario's keys, below), a `[run]` table and an optional `[load]` table."),
        ("A sweep spec (`memsim sweep SPEC.toml`)", SweepSpec, "Scenarios with grids, systems with grids, seeds; each cell is one run."),
    ]
    seen: set[type[BaseModel]] = set()
    for heading, model, text in roots:
        out.append(f"## {heading}\n\n{text}\n")
        _model_section(model, model.__name__, out, seen)
    out.append("## Scenario keys (`[scenario]`)\n\nThe options of the scenarios, by the module that defines them.\n")
    for model in _scenario_models():
        if model not in seen:
            _model_section(model, f"{model.__name__} ({model.__module__.rpartition('.')[2]})", out, seen)
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- run folder


def _polars_type(dtype: Any) -> str:
    return str(dtype).replace("String", "Utf8")


def _summary_keys() -> tuple[list[str], list[str]]:
    """Keys ``summarise`` (and its steps) write at the top of ``metrics.json`` and into each system's entry, read from
    the summariser's source."""
    from memsim.analysis import summary

    tree = ast.parse(inspect.getsource(summary))
    top: list[str] = []
    per_system: list[str] = []

    def add(into: list[str], key: Any) -> None:
        if isinstance(key, str) and key not in into:
            into.append(key)

    for node in ast.walk(tree):
        target, value = None, None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict):
            if target.id == "metrics":
                for k in value.keys:
                    add(top, getattr(k, "value", None))
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and isinstance(target.slice, ast.Constant):
            if target.value.id == "metrics":
                add(top, target.slice.value)
            elif target.value.id == "entry":
                add(per_system, target.slice.value)
        if (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "entry"
        ):
            for kw in node.keywords:
                add(per_system, kw.arg)
    if not top or not per_system:
        # The page would go quietly empty: say where the reader of the summariser's source needs a change.
        raise ValueError("docs/hooks/gen_reference.py: summarise no longer fills `metrics[...]` and `entry`; update _summary_keys")
    return top, per_system


def run_folder_page() -> str:
    """The run folder's files and columns, from the recorder's schemas, the scorers and the summariser."""
    from memsim.sim import recorder
    from memsim.sim.scorers import build_scorer, scorer_description, scorer_names
    from memsim.sim.spec import RunSpec

    out = ["# Run folder\n", GENERATED_NOTE]
    files = ", ".join(f"`{f}`" for f in recorder.RUN_FILES)
    out.append(
        f"A finished run folder holds {files} (`memsim.sim.recorder.RUN_FILES`), then what analysis adds: "
        "`metrics.json` and `perf.json` (`memsim.analysis.summary.write_summary`) and `report.html` / `report.md`. "
        "The [tutorial](../tutorial.md#reading-the-run-folder) says how to read them.\n"
    )
    for title, name in (("`probes.parquet`", "PROBE_SCHEMA"), ("`timeline.parquet`", "TIMELINE_SCHEMA")):
        schema = getattr(recorder, name)
        doc = attribute_docs_module(recorder).get(name, "")
        out.append(f"## {title}\n\n`memsim.sim.recorder.{name}`" + (f": {_cell(doc)}" if doc else "") + "\n")
        out.append("| column | type |\n|---|---|")
        out.extend(f"| {_code(col)} | {_code(_polars_type(dtype))} |" for col, dtype in schema.items())
        out.append("")
    ks = tuple(RunSpec.model_fields["ks"].default)
    out.append(
        "## Scorer columns\n\nEach registered scorer adds its columns to `probes.parquet` "
        f"(shown for the default cut-offs `ks = {list(ks)}`; a run scores the cut-offs it fetched).\n"
    )
    out.append("| scorer | columns | what it scores |\n|---|---|---|")
    for name in scorer_names():
        cols = build_scorer(name).columns(ks)
        out.append(f"| {_code(name)} | {', '.join(_code(c) for c in cols)} | {_cell(scorer_description(name))} |")
    out.append("")
    top, per_system = _summary_keys()
    out.append(
        "## `metrics.json`\n\nWritten by `memsim.analysis.summary.summarise`; only figures the rows and the seed "
        "determine, so the same run gives the same bytes. Keys at the top level (some only for longitudinal runs, "
        "with a reader, or with a `[load]` table):\n"
    )
    out.append(", ".join(_code(k) for k in top) + "\n")
    out.append("Keys of each entry under `systems` (the learning-table keys come first when twins were played):\n")
    out.append(", ".join(_code(k) for k in per_system) + "\n")
    return "\n".join(out) + "\n"


def attribute_docs_module(module: types.ModuleType) -> dict[str, str]:
    """Docstrings written under a module's top-level assignments."""
    tree = ast.parse(inspect.getsource(module))
    docs: dict[str, str] = {}
    for node, after in zip(tree.body, tree.body[1:]):
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            docs[target.id] = inspect.cleandoc(str(after.value.value))
    return docs


# --------------------------------------------------------------------------- registries


def registries_page() -> str:
    """What ``memsim list`` prints, one table per registry."""
    from memsim.analysis.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        main(["list"])
    out = ["# Registries\n", GENERATED_NOTE]
    out.append(
        "What `memsim list` prints: every registered system, scenario, reader, judge and scorer. "
        "A system is named as `NAME` or `NAME:key=value,...` wherever `--system` is taken.\n"
    )
    for line in buffer.getvalue().splitlines():
        if line and not line.startswith(" "):
            out.append(f"\n## {line.rstrip(':').capitalize()}\n\n| name | what it is |\n|---|---|")
        elif line.strip():
            name, _, text = line.strip().partition("  ")
            out.append(f"| {_code(name)} | {_cell(text)} |")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- the README


README_MAX_LINES = 150
"""The README is a front door; everything else lives on this site."""


def check_readme() -> None:
    """Fail the build when the README grows past its limit, links a missing file or names a missing command."""
    from mkdocs.exceptions import PluginError

    from memsim.analysis.cli import COMMANDS

    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    problems = []
    if len(text.splitlines()) > README_MAX_LINES:
        problems.append(f"{len(text.splitlines())} lines, more than {README_MAX_LINES}")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in target and not (ROOT / target).exists():
            problems.append(f"link to {target}, which does not exist")
    known = {name for name, _, _ in COMMANDS}
    # Commands are named in code: fenced blocks and inline spans.
    code = re.findall(r"```[a-z]*\n(.*?)```", text, re.S) + re.findall(r"`([^`\n]+)`", text)
    for command in sorted({c for chunk in code for c in re.findall(r"(?m)(?:^|[\s/])memsim ([a-z][a-z-]*)", chunk)}):
        if command not in known:
            problems.append(f"command 'memsim {command}', which does not exist")
    if problems:
        raise PluginError(f"{readme}: " + "; ".join(problems))


# --------------------------------------------------------------------------- the hook


PAGES = {
    "reference/cli.md": cli_page,
    "reference/config.md": config_page,
    "reference/run-folder.md": run_folder_page,
    "reference/registries.md": registries_page,
}
"""Generated page -> the function that writes it."""


_LINK_DIRS: list[Path] = []


@event_priority(100)  # before mkdocstrings computes its search paths in its own on_config
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Put the checkout being built first on the import path, under its package name ``memsim``.

    The repository root is the package (``package-dir``), so neither a plain
    clone nor the static search of mkdocstrings finds ``memsim`` by its
    folder's name; a link named ``memsim`` does, and makes the pages describe
    this checkout whatever else is installed.
    """
    link_dir = Path(tempfile.mkdtemp(prefix="memsim-docs-"))
    (link_dir / "memsim").symlink_to(ROOT, target_is_directory=True)
    sys.path.insert(0, str(link_dir))
    _LINK_DIRS.append(link_dir)
    return config


def on_shutdown() -> None:
    """Remove the link made by ``on_config``."""
    while _LINK_DIRS:
        shutil.rmtree(_LINK_DIRS.pop(), ignore_errors=True)


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    """Add the generated reference pages and the figures kept beside the code to the site's files."""
    # A fixed width, so that argparse wraps usage lines the same on every machine.
    os.environ["COLUMNS"] = "100"
    check_readme()
    for uri, page in PAGES.items():
        files.append(File.generated(config, uri, content=page()))
    for uri, path in FIGURES.items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
