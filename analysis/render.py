"""An LLM rewrite of a generated stream's turns that keeps the truth.

The scenario has sampled the truth and written template text; here every
turn is rewritten, one at a time, through any chat client (an
OpenAI-compatible endpoint behind the response cache, so a rerun makes no
calls). A fact-bearing turn, one listed in ``stream.meta["facts"]``
(``{turn_id: [value, alias, ...]}``), keeps its rewrite only when the
rewrite still carries the fact: at least one of its strings appears in it,
ignoring case, and every named judge accepts it with the value as gold. A
rewrite that fails is tried again (``retries`` times, sampled at a
temperature above zero with a new seed each time) and the turn is then kept
in its generated form. Ids, times, speakers and metadata never change, nor
do questions, so gold answers and evidence stay those of the truth.

Counts (``RENDER_COUNTS``): ``turns``, ``fact_turns``, ``rewritten`` (turns
whose text is now a rewrite), ``verified`` (fact turns whose rewrite passed),
``retried`` (fact turns that needed another try), ``retries`` (the extra
tries), ``kept_as_generated`` (turns left as generated: failed fact turns
and empty replies).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from memsim.memory.base import Turn
from memsim.scenarios.base import ScenarioStream
from memsim.core.errors import UserError
from memsim.sim.events import Session

__all__ = ["RENDER_COUNTS", "render_stream", "verify_fact", "rewrite_messages", "format_counts"]

RENDER_COUNTS = ("turns", "fact_turns", "rewritten", "verified", "retried", "retries", "kept_as_generated")
"""The counts a render reports, in order."""

_INSTRUCTIONS = (
    "You edit lines of a chat between a person and an assistant so that they read like a real conversation. "
    "Rewrite the line you are given in your own words, as the same speaker would say it: vary the wording and "
    "sentence structure, and you may add a short natural aside. Keep every name, place, number, date and stated "
    "fact exactly. Reply with the rewritten line only, with no quotes or explanations."
)
_MAX_TOKENS = 160
_RETRY_TEMPERATURE = 0.8


def rewrite_messages(turn: Turn, previous: str | None) -> list[dict[str, str]]:
    """The chat messages that ask for a rewrite of ``turn`` (``previous``: the line before it, for context)."""
    context = f"The line before it: {previous}\n" if previous else ""
    return [
        {"role": "system", "content": _INSTRUCTIONS},
        {"role": "user", "content": f"{context}Speaker: {turn.speaker}\nLine to rewrite: {turn.text}"},
    ]


def verify_fact(text: str, strings: Sequence[str], judges: Sequence[Any] = (), *, original: str = "") -> bool:
    """Whether ``text`` carries the fact: a string of ``strings`` occurs in it (case-insensitive) and every judge accepts it."""
    low = text.casefold()
    if not any(s and s.casefold() in low for s in strings):
        return False
    question = f"What fact does this message state? (as first written: {original})"
    return all(j.score(question=question, gold=strings[0], answer=text) >= 0.5 for j in judges)


def _clean(reply: str) -> str:
    """The reply as a line: surrounding whitespace and one pair of wrapping quotes removed."""
    text = reply.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def render_stream(stream: ScenarioStream, client: Any, *, judges: Sequence[str] = (), retries: int = 2,
                  seed: int = 0) -> tuple[ScenarioStream, dict[str, int]]:
    """``stream`` with its turns rewritten by ``client`` and the facts verified, and the counts.

    Args:
        stream: a generated longitudinal stream whose ``meta["facts"]`` names its fact-bearing turns.
        client: an ``LLMClient`` (wrap it in ``CachedLLM`` so that a rerun is served from the cache).
        judges: registered judges that must also accept each fact-bearing rewrite (LLM judges use ``client``).
        retries: further tries of a fact-bearing rewrite that failed verification.
        seed: seed of the first try (try ``i`` uses ``seed + i``).

    Raises:
        UserError: the stream has no ``meta["facts"]`` (nothing could be verified), or a bad judge name.
    """
    facts: Mapping[str, Sequence[str]] | None = stream.meta.get("facts")
    if not facts:
        raise UserError("render: the scenario gives no meta['facts'] ({turn_id: [value, alias, ...]}), "
                        "so a rewrite could not be verified to keep the truth; write it unchanged (no --llm)")
    from memsim.sim.answer.judges import build_judge

    built = [build_judge(name, client) for name in judges]
    counts = dict.fromkeys(RENDER_COUNTS, 0)
    events = []
    for e in stream.events:
        if not isinstance(e, Session):
            events.append(e)
            continue
        turns: list[Turn] = []
        previous: str | None = None
        for turn in e.turns:
            text = _rewrite(turn, previous, facts.get(turn.turn_id), client, built, retries, seed, counts)
            turns.append(turn if text is None else replace(turn, text=text))
            previous = turns[-1].text
        events.append(replace(e, turns=tuple(turns)))
    meta = {**stream.meta, "render": dict(counts)}
    return replace(stream, events=tuple(events), meta=meta), counts


def _rewrite(turn: Turn, previous: str | None, strings: Sequence[str] | None, client: Any, judges: Sequence[Any],
             retries: int, seed: int, counts: dict[str, int]) -> str | None:
    """The accepted rewrite of ``turn``, or None to keep it as generated; ``counts`` updated."""
    counts["turns"] += 1
    messages = rewrite_messages(turn, previous)
    if not strings:
        text = _clean(client.chat(messages, max_tokens=_MAX_TOKENS, temperature=0.0, seed=seed).text)
        counts["rewritten" if text else "kept_as_generated"] += 1
        return text or None
    counts["fact_turns"] += 1
    for attempt in range(retries + 1):
        temperature = 0.0 if attempt == 0 else _RETRY_TEMPERATURE
        text = _clean(client.chat(messages, max_tokens=_MAX_TOKENS, temperature=temperature, seed=seed + attempt).text)
        if attempt == 1:
            counts["retried"] += 1
        counts["retries"] += attempt > 0
        if text and verify_fact(text, strings, judges, original=turn.text):
            counts["verified"] += 1
            counts["rewritten"] += 1
            return text
    counts["kept_as_generated"] += 1
    return None


def format_counts(counts: Mapping[str, int]) -> str:
    """One line of the render counts."""
    return "render: " + ", ".join(f"{name.replace('_', ' ')} {counts.get(name, 0):,}" for name in RENDER_COUNTS)
