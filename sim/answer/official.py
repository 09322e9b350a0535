"""Official judge prompts, read at run time from the user's own copy of a benchmark's code.

memsim ships no copy of anyone's prompt text. ``--judge-prompts PATH`` points
at a file the user has:

- LongMemEval's QA evaluation script (``src/evaluation/evaluate_qa.py`` of
  their checkout, or the checkout's folder): its prompt function
  (``get_anscheck_prompt(task, question, answer, response, abstention)``)
  picks a template string per question type, and another for abstention,
  and fills it with ``template.format(question, answer, response)``. The
  templates become ``llm_longmemeval``'s rubrics.
- A Mem0 evaluation prompt file: a module-level ``..._PROMPT`` string with
  the fields ``{question}``, ``{gold_answer}`` and ``{generated_answer}``.
  It becomes ``llm_locomo``'s template.

The file is parsed with ``ast`` (never executed), and its strings are used
verbatim: only their placeholders are renamed to memsim's fields
(``{question}``, ``{gold}``, ``{answer}``). The file's path and hash are
recorded as the prompt source of the judge.

``--prompts PATH`` (``load_prompt_file``) reads reader templates as well as
judge templates from a file the user has, parsed the same way:

- Mem0's evaluation ``prompts.py``: its answer prompt, a module-level string
  with the Jinja fields ``{{speaker_1_user_id}}``, ``{{speaker_1_memories}}``,
  ``{{speaker_2_user_id}}``, ``{{speaker_2_memories}}`` and ``{{question}}``,
  becomes the ``short`` reader, its memories laid out per speaker as Mem0
  lays them out (``layout="speakers"``); a judge prompt in the same file
  (above) becomes ``llm_locomo``'s.
- The seed's ``prompts.py``: reader templates are the module-level strings
  and the f-string or ``str.format`` templates returned by its functions
  that name a question and the memories (``{question}`` and one of
  ``{context}``, ``{memories}``); one whose name says ``cot`` (chain of
  thought) is the ``cot`` reader, the other the ``short`` one. A
  ``{question_date}`` or ``{date}`` field is filled only where the template
  has one: memsim adds no date the prompt does not ask for.
- LongMemEval's ``evaluate_qa.py``: its judge templates (above).
"""

from __future__ import annotations

import ast
import hashlib
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsim.sim.answer.prompts import JUDGE_LONGMEMEVAL_TYPES, PromptTemplate
from memsim.core.errors import UserError

__all__ = ["OfficialPrompts", "PromptFile", "ReaderPrompt", "load_official_prompts", "load_prompt_file", "LONGMEMEVAL_SCRIPT"]

LONGMEMEVAL_SCRIPT = "src/evaluation/evaluate_qa.py"
"""Where LongMemEval's QA evaluation script lives in a checkout of its repository."""

_LME_FUNCTION = "get_anscheck_prompt"
# The prompt function's argument names -> memsim's fields.
_LME_ARGS = {"question": "question", "answer": "gold", "response": "answer"}
_MEM0_FIELDS = {"question": "question", "gold_answer": "gold", "generated_answer": "answer"}


@dataclass(frozen=True, slots=True)
class OfficialPrompts:
    """Templates parsed from a user's file, for one judge."""

    judge: str
    """The judge they are for (``llm_longmemeval`` or ``llm_locomo``)."""
    templates: Mapping[str, PromptTemplate]
    """Rubric key -> template (keys as the judge's own templates)."""
    source: str
    """The file and the start of its sha256, as the spec records it."""

    def describe(self) -> dict[str, Any]:
        """What a run's spec records: judge, source and template ids."""
        return {"judge": self.judge, "source": self.source, "prompt_ids": [t.id for t in self.templates.values()]}


def _parse(path: str | Path, flag: str) -> tuple[Path, ast.Module, str]:
    """The file (a LongMemEval checkout's script for a folder), its syntax tree and its source line."""
    p = Path(path).expanduser()
    if p.is_dir():
        script = p / LONGMEMEVAL_SCRIPT
        if not script.is_file():
            raise UserError(
                f"{flag} {p}: a folder, but not a LongMemEval checkout (no {LONGMEMEVAL_SCRIPT}); "
                "pass the evaluation file itself"
            )
        p = script
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{flag} {p}: no such file") from None
    except OSError as exc:
        raise UserError(f"{flag} {p}: cannot read: {exc.strerror or exc}") from None
    try:
        tree = ast.parse(raw.decode("utf-8"), filename=str(p))
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise UserError(f"{flag} {p}: not a Python file ({exc})") from None
    return p, tree, f"{p} (sha256 {hashlib.sha256(raw).hexdigest()})"


def _judges_in(tree: ast.Module, p: Path, source: str) -> OfficialPrompts | None:
    func = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == _LME_FUNCTION), None
    )
    if func is not None:
        return OfficialPrompts("llm_longmemeval", _longmemeval_templates(func, p), source)
    mem0 = _mem0_template(tree, p)
    if mem0 is not None:
        return OfficialPrompts("llm_locomo", {"default": mem0}, source)
    return None


def load_official_prompts(path: str | Path) -> OfficialPrompts:
    """Parse the official judge templates in ``path`` (see the module docstring).

    Raises:
        UserError: the file is missing or unreadable, is not Python, or has
            neither structure (the message says what was looked for).
    """
    p, tree, source = _parse(path, "--judge-prompts")
    found = _judges_in(tree, p, source)
    if found is not None:
        return found
    raise UserError(
        f"--judge-prompts {p}: found neither LongMemEval's prompt function ({_LME_FUNCTION}) nor a Mem0 "
        "prompt (a module-level ..._PROMPT string with {question}, {gold_answer} and {generated_answer})"
    )


def _rename_fields(text: str, positional: list[str], named: Mapping[str, str], where: str) -> str:
    """``text`` with its ``str.format`` fields renamed to memsim's; literal braces kept escaped."""
    out: list[str] = []
    auto = 0
    for literal, field, spec, conv in string.Formatter().parse(text):
        out.append(literal.replace("{", "{{").replace("}", "}}"))
        if field is None:
            continue
        if spec or conv:
            raise UserError(f"{where}: placeholder {{{field}}} has a format spec memsim does not handle")
        if field == "":
            if auto >= len(positional):
                raise UserError(f"{where}: more {{}} placeholders than arguments to format()")
            name = positional[auto]
            auto += 1
        elif field.isdigit():
            if int(field) >= len(positional):
                raise UserError(f"{where}: placeholder {{{field}}} has no argument in format()")
            name = positional[int(field)]
        elif field in named:
            name = named[field]
        else:
            raise UserError(f"{where}: unknown placeholder {{{field}}}; expected {', '.join(sorted(named))}")
        out.append("{" + name + "}")
    return "".join(out)


def _tasks_of(test: ast.expr) -> list[str] | None:
    """Question types an ``if`` on ``task`` selects (``task == 'x'``, ``task in [...]``); None: not such a test."""
    if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and len(test.ops) == 1):
        return None
    right = test.comparators[0]
    try:
        value = ast.literal_eval(right)
    except ValueError:
        return None
    if isinstance(test.ops[0], ast.Eq) and isinstance(value, str):
        return [value]
    if isinstance(test.ops[0], ast.In) and isinstance(value, (list, tuple, set)):
        return [str(v) for v in value]
    return None


def _abstention_test(test: ast.expr) -> bool | None:
    """True for ``if abstention``, False for ``if not abstention``; None: another test."""
    if isinstance(test, ast.Name) and "abstention" in test.id:
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _abstention_test(test.operand)
        return None if inner is None else not inner
    return None


def _longmemeval_templates(func: ast.FunctionDef, path: Path) -> dict[str, PromptTemplate]:
    where = f"--judge-prompts {path}, {func.name}"
    found: dict[str, str] = {}
    order: list[str] | None = None

    def visit(body: list[ast.stmt], tasks: list[str] | None, abstention: bool) -> None:
        nonlocal order
        for node in body:
            if isinstance(node, ast.If):
                abs_test = _abstention_test(node.test)
                if abs_test is not None:
                    visit(node.body, tasks, abs_test)
                    visit(node.orelse, tasks, not abs_test)
                    continue
                chosen = _tasks_of(node.test)
                visit(node.body, chosen if chosen is not None else tasks, abstention)
                visit(node.orelse, tasks, abstention)
                continue
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "format":
                    names = [a.id for a in sub.args if isinstance(a, ast.Name)]
                    if len(names) == len(sub.args) and names:
                        order = names
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "template" for t in node.targets):
                try:
                    text = ast.literal_eval(node.value)
                except ValueError:
                    raise UserError(f"{where}, line {node.lineno}: the template is not a plain string") from None
                if not isinstance(text, str):
                    raise UserError(f"{where}, line {node.lineno}: the template is not a string")
                if abstention:
                    found["abstention"] = text
                    continue
                for task in tasks or ():
                    key = JUDGE_LONGMEMEVAL_TYPES.get(task)
                    if key is not None:
                        found.setdefault(key, text)

    visit(func.body, None, False)
    if order is None:
        raise UserError(f"{where}: no template.format(...) call naming its arguments")
    unknown = [a for a in order if a not in _LME_ARGS]
    if unknown:
        raise UserError(f"{where}: format() arguments {unknown} unknown; expected {', '.join(_LME_ARGS)}")
    missing = {"default", "abstention"} - found.keys()
    if missing:
        raise UserError(f"{where}: no template for {', '.join(sorted(missing))} questions")
    positional = [_LME_ARGS[a] for a in order]
    return {
        key: PromptTemplate(
            name=f"official_lme_{key}", system="", user=_rename_fields(text, positional, {}, f"{where} ({key})")
        )
        for key, text in found.items()
    }


def _mem0_template(tree: ast.Module, path: Path) -> PromptTemplate | None:
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        name = node.targets[0].id
        if not name.endswith("PROMPT"):
            continue
        try:
            text = ast.literal_eval(node.value)
        except ValueError:
            continue
        if not isinstance(text, str):
            continue
        fields = {f for _, f, _, _ in string.Formatter().parse(text) if f}
        if set(_MEM0_FIELDS) <= fields:
            user = _rename_fields(text, [], _MEM0_FIELDS, f"--judge-prompts {path}, {name}")
            return PromptTemplate(name="official_mem0", system="", user=user)
    return None


# --------------------------------------------------------------------------- reader templates (--prompts)

_MEM0_READER = ("speaker_1_user_id", "speaker_1_memories", "speaker_2_user_id", "speaker_2_memories", "question")
_JINJA_FIELD = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_SEED_MEMORIES = ("context", "memories")
_SEED_DATES = ("question_date", "date")


@dataclass(frozen=True, slots=True)
class ReaderPrompt:
    """A reader template read from a user's file, with how memories fill it."""

    template: PromptTemplate
    """Fields: ``question``, ``memories`` (``layout="lines"``) or the speakers' fields, maybe ``question_date``."""
    layout: str
    """``lines`` (one memory a line) or ``speakers`` (Mem0's: each speaker's memories apart, as JSON lists)."""
    source: str
    """The file and its sha256."""


@dataclass(frozen=True, slots=True)
class PromptFile:
    """What ``--prompts`` found in one file: reader templates by variant, judge templates."""

    readers: Mapping[str, ReaderPrompt]
    judges: OfficialPrompts | None
    source: str

    def describe(self) -> dict[str, Any]:
        """What a run's spec records."""
        return {
            "source": self.source,
            "readers": {v: r.template.id for v, r in self.readers.items()},
            "judges": self.judges.describe() if self.judges is not None else None,
        }


def load_prompt_file(path: str | Path) -> PromptFile:
    """Reader and judge templates in ``path`` (see the module docstring), parsed without running the file.

    Raises:
        UserError: the file is missing, unreadable or not Python, or holds neither reader nor judge templates.
    """
    p, tree, source = _parse(path, "--prompts")
    readers = _mem0_readers(tree, p, source) or _seed_readers(tree, p, source)
    judges = _judges_in(tree, p, source)
    if not readers and judges is None:
        raise UserError(
            f"--prompts {p}: found no reader template (Mem0's answer prompt with {{{{speaker_1_memories}}}}, or a "
            "string with {question} and {context} or {memories}) and no judge template (LongMemEval's "
            f"{_LME_FUNCTION} or a Mem0 judge prompt)"
        )
    return PromptFile(readers, judges, source)


def _strings(tree: ast.Module) -> list[tuple[str, str, int]]:
    """``(name, text, line)`` of every module-level string and of every template returned or assigned in a function.

    An f-string's fields become ``str.format`` fields of the same names (``{x}``); its literal text is kept.
    """
    out: list[tuple[str, str, int]] = []

    def text_of(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value).replace("{", "{{").replace("}", "}}"))
                elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) and v.format_spec is None:
                    parts.append("{" + v.value.id + "}")
                else:
                    return None
            return "".join(parts)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
                and not node.args):
            return text_of(node.func.value)
        return None

    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            text = text_of(node.value)
            if text is not None:
                out.append((node.targets[0].id, text, node.lineno))
        elif isinstance(node, ast.FunctionDef):
            for sub in ast.walk(node):
                value = sub.value if isinstance(sub, (ast.Return, ast.Assign)) else None
                text = text_of(value) if value is not None else None
                if text is not None:
                    out.append((node.name, text, sub.lineno))
    return out


def _mem0_readers(tree: ast.Module, p: Path, source: str) -> dict[str, ReaderPrompt]:
    for name, text, _ in _strings(tree):
        fields = set(_JINJA_FIELD.findall(text))
        if set(_MEM0_READER) <= fields:
            # Jinja's {{name}} -> str.format's {name}; every other brace is literal.
            user = "".join(
                piece.replace("{", "{{").replace("}", "}}") if i % 2 == 0 else "{" + piece + "}"
                for i, piece in enumerate(_JINJA_FIELD.split(text))
            )
            template = PromptTemplate(name=f"mem0_{name.lower()}", system="", user=user)
            return {"short": ReaderPrompt(template, "speakers", source)}
    return {}


def _seed_readers(tree: ast.Module, p: Path, source: str) -> dict[str, ReaderPrompt]:
    found: dict[str, ReaderPrompt] = {}
    for name, text, line in _strings(tree):
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(text) if f}
        except ValueError:
            continue
        memories = next((f for f in _SEED_MEMORIES if f in fields), None)
        if "question" not in fields or memories is None:
            continue
        date = next((f for f in _SEED_DATES if f in fields), None)
        rename = {"question": "question", memories: "memories", **({date: "question_date"} if date else {})}
        unknown = sorted(fields - rename.keys())
        if unknown:
            raise UserError(f"--prompts {p}, {name} (line {line}): fields {unknown} memsim cannot fill; "
                            f"it fills question, {' or '.join(_SEED_MEMORIES)} and {' or '.join(_SEED_DATES)}")
        variant = "cot" if "cot" in name.lower() else "short"
        user = _rename_fields(text, [], rename, f"--prompts {p}, {name}")
        found.setdefault(variant, ReaderPrompt(PromptTemplate(name=f"seed_{name.lower()}", system="", user=user),
                                               "lines", source))
    return found
