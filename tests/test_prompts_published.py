"""``--prompts PATH``: reader and judge templates from the user's copy of a published prompt file (issue #27, defect 2).

The fixtures are written in the structure of each source with placeholder wording of memsim's own.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memsim.memory.base import Retrieved
from memsim.sim.answer import ScriptedLLM
from memsim.sim.answer.official import load_prompt_file
from memsim.sim.answer.readers import PROMPT_PARAPHRASE, Reader
from memsim.core.errors import UserError

FIXTURES = Path(__file__).parent / "fixtures"
MEM0 = FIXTURES / "prompts" / "mem0_prompts.py"
SEED = FIXTURES / "prompts" / "seed_prompts.py"
LME = FIXTURES / "judge_prompts" / "evaluate_qa.py"
T = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def _memories() -> list[Retrieved]:
    return [
        Retrieved("m1", "1:56 pm on 8 May, 2023 | Caroline: I went to a support group.", 0.9, T, ("t1",)),
        Retrieved("m2", "1:56 pm on 8 May, 2023 | Melanie: I painted a sunrise.", 0.8, T, ("t2",)),
        Retrieved("m3", "2:10 pm on 9 May, 2023 | Caroline: I want to study counseling.", 0.7, T.replace(day=9), ("t3",)),
    ]


def test_mem0_answer_prompt_lists_each_speakers_memories_apart_with_no_invented_date() -> None:
    found = load_prompt_file(MEM0)
    sha = hashlib.sha256(MEM0.read_bytes()).hexdigest()
    assert found.source == f"{MEM0} (sha256 {sha})"
    reader_prompt = found.readers["short"]
    assert reader_prompt.layout == "speakers" and set(found.readers) == {"short"}
    llm = ScriptedLLM("a support group")
    reader = Reader(llm, "short", template=reader_prompt.template, layout="speakers", prompt_source=found.source)
    reader.answer("What did Caroline go to?", T, _memories())
    sent = llm.calls[0]["messages"][-1]["content"]
    assert sent.startswith("\nFIXTURE-MEM0-READER.")
    caroline = json.dumps(["1:56 pm on 8 May, 2023: I went to a support group.",
                           "2:10 pm on 9 May, 2023: I want to study counseling."], indent=4)
    melanie = json.dumps(["1:56 pm on 8 May, 2023: I painted a sunrise."], indent=4)
    assert f"Memories of Caroline:\n{caroline}\n" in sent and f"Memories of Melanie:\n{melanie}\n" in sent
    assert "Today is" not in sent and "Monday" not in sent  # the published prompt has no question date
    assert reader.describe()["prompt_source"] == found.source
    # The judge prompt in the same file becomes llm_locomo's.
    assert found.judges is not None and found.judges.judge == "llm_locomo"


def test_seed_prompts_give_the_short_and_cot_readers() -> None:
    found = load_prompt_file(SEED)
    assert set(found.readers) == {"short", "cot"} and found.judges is None
    llm = ScriptedLLM("Reasoning...\nAnswer: counseling")
    reader = Reader(llm, "cot", template=found.readers["cot"].template, prompt_source=found.source)
    answer = reader.answer("What will Caroline study?", T, _memories())
    sent = llm.calls[0]["messages"][-1]["content"]
    assert sent.startswith("FIXTURE-SEED-COT.\nContext:\n- 1:56 pm on 8 May, 2023 | Caroline: I went")
    assert "Q: What will Caroline study?" in sent and "Monday" not in sent
    assert answer.text == "counseling"
    assert found.readers["short"].template.render(memories="M", question="Q")[-1]["content"].startswith(
        "FIXTURE-SEED-SHORT.\nContext:\nM\n\nQ: Q")


def test_longmemeval_evaluation_script_gives_judges_only() -> None:
    found = load_prompt_file(LME)
    assert found.readers == {} and found.judges is not None and found.judges.judge == "llm_longmemeval"


def test_memsim_own_reader_prompt_is_labelled_a_paraphrase() -> None:
    assert Reader(ScriptedLLM("x"), "short").describe()["prompt_source"] == PROMPT_PARAPHRASE == "memsim paraphrase"


def test_a_file_without_templates_is_a_user_error(tmp_path: Path) -> None:
    other = tmp_path / "other.py"
    other.write_text("X = 1\n")
    with pytest.raises(UserError, match=r"--prompts .*other.py: found no reader template"):
        load_prompt_file(other)
    with pytest.raises(UserError, match="no such file"):
        load_prompt_file(tmp_path / "missing.py")


def test_answer_setup_reads_prompts_and_records_the_source() -> None:
    from memsim.sim.answer.options import AnswerOptions
    from memsim.sim.answer.setup import answer_setup

    setup = answer_setup(AnswerOptions(reader="short", llm="openai", llm_base_url="http://127.0.0.1:9/v1",
                                       llm_model="m", prompts=(str(MEM0),), dry_run=True),
                         default_judges=("contains",))
    assert setup is not None
    described = setup.describe()["reader"]
    assert described["prompt_source"].startswith(str(MEM0)) and described["layout"] == "speakers"
    with pytest.raises(UserError, match="no cot reader template"):
        answer_setup(AnswerOptions(reader="cot", llm="openai", llm_base_url="http://127.0.0.1:9/v1", llm_model="m",
                                   prompts=(str(MEM0),), dry_run=True), default_judges=("contains",))
