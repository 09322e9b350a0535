"""How one simulated user writes: a register drawn once per user and applied to every turn they type.

Two users of the life world ask for the same recipe in different words: one
writes "Could you give me a recipe, please? Thank you." and another "ok so can u
gimme a recipe lol". A ``Voice`` is drawn once per user from their text
generator and holds the stable traits (how formal, which fillers and tags they
favour, whether they contract, write in lower case, use texting shorthand,
drop full stops, make typos, use emoji, run sentences together); ``Voice.say``
rewrites a composed turn in that register.

What a turn asserts never changes: the spans that carry its claims (values,
aliases, date phrases, a forget request's topic) are passed as ``keep`` and
left letter for letter as they are, and the register is applied to turns
with and without a fact in the same way, so no trait marks the turns that
bear one.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Voice", "draw_voice", "FILLERS", "TAGS", "SHORTHAND"]

FILLERS = (
    "honestly,", "ok so", "so", "well,", "right,", "anyway,", "oh,", "hmm,", "look,", "to be fair,", "funnily enough,",
    "fwiw", "okay,", "ugh,", "ha,", "not gonna lie,", "as it happens,", "also,", "oh and", "side note:", "quick thing:",
    "on another note,", "random, but", "btw", "actually,", "fun fact:", "small thing:", "so yeah,", "alright,", "um,",
    "incidentally,", "for what it's worth,", "oh, before I forget,", "while I think of it,", "unrelated, but",
    "mind you,", "heads up:", "just so you know,", "listen,", "you know what?", "I mean,", "basically,",
    "long story short,", "in other news,", "meanwhile,", "oh right,", "and", "but", "sorry,", "hey,", "by the way,",
    "now,", "still,", "anyhow,", "in any case,", "if I'm honest,", "truth be told,", "between you and me,",
    "so anyway,", "ah,", "er,", "oh well,", "right then,", "okay okay,", "first things first,", "last thing:",
    "one more thing:",
)
"""Discourse markers a user may open a sentence with; each user favours a handful."""

TAGS = (
    "lol", "haha", ":)", ":D", "🙂", "😅", "🙏", "👍", "thanks!", "cheers", "thx", "ty", "if that makes sense",
    "no rush", "x", "😂", "🤞", "tbh", "anyway", "ha", "thanks in advance", "much appreciated",
    "if you can", "fingers crossed", "😊", "🙃", "✨", "hope that's clear", "ta", "many thanks", "phew", "oh well",
    "right?", "you know", "help!", "please and thank you", "cheers in advance",
)
"""What a user may end a turn with (never a hedge such as "I think": it would weaken what the turn asserts)."""

SHORTHAND = (
    ("you", "u"), ("your", "ur"), ("please", "pls"), ("thanks", "thx"), ("though", "tho"), ("because", "cuz"),
    ("going to", "gonna"), ("want to", "wanna"), ("probably", "prob"), ("tonight", "tonite"), ("something", "smth"),
    ("people", "ppl"), ("really", "rly"), ("about", "abt"), ("and", "&"), ("okay", "ok"), ("minutes", "mins"),
    ("tomorrow", "tmrw"), ("before", "b4"), ("with", "w/"), ("to be honest", "tbh"), ("I don't know", "idk"),
    ("by the way", "btw"), ("got to", "gotta"), ("kind of", "kinda"), ("give me", "gimme"), ("let me", "lemme"),
    ("are", "r"), ("see you", "cya"), ("definitely", "def"), ("message", "msg"), ("favourite", "fave"),
)
"""Texting forms (the full form, the short one); a casual user uses some of them, often."""

_CONTRACT = (
    ("I am", "I'm"), ("I have", "I've"), ("I will", "I'll"), ("I would", "I'd"), ("do not", "don't"),
    ("does not", "doesn't"), ("did not", "didn't"), ("cannot", "can't"), ("is not", "isn't"), ("it is", "it's"),
    ("that is", "that's"), ("we are", "we're"), ("we have", "we've"), ("they are", "they're"),
    ("there is", "there's"), ("what is", "what's"), ("would not", "wouldn't"), ("have not", "haven't"),
    ("you are", "you're"), ("are not", "aren't"), ("was not", "wasn't"), ("could not", "couldn't"),
)
# Expanded only where the short form is never ambiguous ("it's" may be "it has", "I'd" "I had").
_EXPAND = tuple((short, full) for full, short in _CONTRACT
                if short not in ("it's", "I'd", "that's", "there's", "what's", "I've"))

# Adverbs that stress, never hedge: "I sort of moved" would weaken what the turn asserts.
_INTENSIFIERS = ("really", "actually", "just", "finally", "honestly", "literally", "totally", "definitely", "genuinely",
                 "seriously")
_INTENSIFIABLE = ("want", "need", "love", "hope", "think", "like", "tried", "started", "moved", "got", "bought",
                  "came", "had", "went", "keep", "wish", "feel", "know", "found", "made", "hate", "mean")

_COMMON = frozenset((
    "can", "could", "how", "is", "what", "help", "my", "please", "would", "quiz", "which", "the", "here", "our", "a",
    "an", "it", "maybe", "if", "someday", "everything", "things", "work", "since", "keep", "remember", "nothing",
    "we", "tell", "try", "budget", "step", "are", "do", "does", "should", "any", "working", "as", "feeding",
    "setting", "some", "someone", "let", "this", "that", "there", "next", "last", "so", "well", "oh", "and", "but",
    "yes", "no", "sure", "ok", "okay", "hi", "hello", "hey", "morning", "evening", "good", "thanks", "thank", "for",
    "in", "on", "at", "to", "with", "not", "just", "also", "now", "then", "one", "two", "quick", "big", "small",
    "guess", "you", "your", "i'm", "i've", "i'd", "i'll", "it's", "that's", "we're", "we've", "they", "they're",
    "when", "where", "who", "why", "all", "after", "before", "still", "right", "back", "anyway", "actually",
    "mind", "need", "want", "planning", "hoping", "looking", "wondering", "thinking", "trying", "got", "had",
    "went", "came", "saw", "made", "did", "have", "has", "was", "were", "be", "been", "being", "am", "get",
    "give", "show", "suggest", "recommend", "walk", "explain", "put", "write", "draft", "check", "find", "sort",
    "plan", "make", "pick", "list", "teach", "talk", "okay:", "right,", "well,", "so,", "oh,", "honestly,",
))
_COMMON = _COMMON | {f.split(" ", 1)[0].strip(",:?") for f in FILLERS}
_WORD = re.compile(r"\b[a-z]{5,}\b")
_SENT = re.compile(r"(?<=[.!?])\s+")
_KEEP = "\x00"


@dataclass(frozen=True)
class Voice:
    """A user's stable way of writing (drawn by ``draw_voice``; rates are per sentence unless said)."""

    formality: float
    """0 (texting) to 1 (letter-writing): how much of the rest is drawn."""
    fillers: tuple[str, ...]
    """The discourse markers this user opens sentences with."""
    filler_rate: float
    tags: tuple[str, ...]
    """What this user ends a turn with."""
    tag_rate: float
    """Per turn."""
    contract: float
    """Chance a contractible pair ("I am") is contracted; the rest of the time a contraction is spelt out."""
    shorthand: tuple[tuple[str, str], ...]
    """The texting forms this user uses."""
    shorthand_rate: float
    """Per occurrence."""
    lower: float
    """Chance a sentence is written in lower case ("i moved"), proper names kept."""
    end: tuple[str, ...]
    """How this user ends a statement: "." mostly, or nothing, "!", "...", " :)"."""
    typo_rate: float
    """Per word of five letters or more."""
    intensify: float
    """Chance of an adverb before a common verb ("I really want", "I finally moved")."""
    run_on: float
    """Chance two sentences run together with a comma or a dash."""
    common: frozenset[str] = frozenset()
    """Lower-cased words, beyond everyday ones, that a sentence may start with and are not names."""

    def say(self, rng: random.Random, text: str, keep: Sequence[str] = ()) -> str:
        """``text`` rewritten in this voice, every string of ``keep`` left letter for letter as it is.

        Args:
            rng: the user's text generator.
            text: the composed turn (sentences ending in ".", "?" or "!").
            keep: strings of the text that carry its claims (values, aliases, date phrases).
        """
        kept: list[str] = []

        def hide(m: re.Match[str]) -> str:
            kept.append(m.group(0))
            return f"{_KEEP}{len(kept) - 1}{_KEEP}"

        for k in sorted({k for k in keep if k}, key=len, reverse=True):
            text = re.sub(re.escape(k), hide, text, flags=re.IGNORECASE)
        sentences = [s for s in _SENT.split(text.strip()) if s]
        out = [self._sentence(rng, s, first=i == 0) for i, s in enumerate(sentences)]
        joined = out[0] if out else ""
        for s in out[1:]:
            if rng.random() < self.run_on and joined[-1:] == "." and s[:1] != _KEEP:
                joined = joined[:-1] + rng.choice((", ", " - ", "; ", ", and ")) + self._lower_first(s)
            else:
                joined = f"{joined} {s}"
        if rng.random() < self.tag_rate:
            joined = f"{joined} {rng.choice(self.tags)}"
        return re.sub(f"{_KEEP}(\\d+){_KEEP}", lambda m: kept[int(m.group(1))], joined)

    def _sentence(self, rng: random.Random, s: str, first: bool) -> str:
        s = self._contractions(rng, s)
        for full, short in self.shorthand:
            if rng.random() < self.shorthand_rate:
                s = re.sub(rf"\b{re.escape(full)}\b", short, s, flags=re.IGNORECASE)
        if rng.random() < self.intensify:
            verbs = "|".join(_INTENSIFIABLE)
            s = re.sub(rf"\b(I|we) ({verbs})\b", lambda m: f"{m.group(1)} {rng.choice(_INTENSIFIERS)} {m.group(2)}",
                       s, count=1)
        if self.typo_rate:
            s = _WORD.sub(lambda m: _typo(rng, m.group(0)) if rng.random() < self.typo_rate else m.group(0), s)
        if rng.random() < self.filler_rate and not s.split(" ", 1)[0].endswith((",", ":")):
            filler = rng.choice(self.fillers)
            s = f"{filler[0].upper()}{filler[1:]} {self._lower_first(s)}"
        if s.endswith(".") and rng.random() < 0.5:
            s = s[:-1] + rng.choice(self.end)
        if rng.random() < self.lower:
            s = self._lower_first(re.sub(r"\bI\b", "i", s))
        return re.sub(r"(?<!\.)\.\.(?!\.)", ".", s.replace(",,", ","))

    def _contractions(self, rng: random.Random, s: str) -> str:
        for full, short in _CONTRACT:
            if full in s and rng.random() < self.contract:
                s = re.sub(rf"\b{full}\b(?= \w)", short, s)  # "here it is:" stays whole
        for short, full in _EXPAND:
            if short in s and rng.random() > self.contract:
                s = re.sub(rf"\b{re.escape(short)}(?!\w)", full, s)
        return s


    def _lower_first(self, s: str) -> str:
        first, _, rest = s.partition(" ")
        word = first.lower().strip(",:;")
        if (word in _COMMON or word in self.common) and first != "I" and not first.startswith("I'"):
            return first.lower() + (" " + rest if rest else "")
        return s


def _typo(rng: random.Random, word: str) -> str:
    """One slip of the fingers: two inner letters swapped, a letter dropped or doubled."""
    i = rng.randrange(1, len(word) - 2)
    kind = rng.randrange(3)
    if kind == 0:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == 1:
        return word[:i] + word[i + 1:]
    return word[:i] + word[i] + word[i:]


def draw_voice(rng: random.Random, common: frozenset[str] = frozenset()) -> Voice:
    """A user's voice, drawn once: a formality, then the traits that go with it (``common``: as ``Voice.common``)."""
    f = rng.betavariate(1.6, 1.6)
    casual = 1.0 - f
    shorthand = tuple(p for p in SHORTHAND if rng.random() < 0.45) if casual > 0.55 else ()
    ends = ["."] * 6
    if casual > 0.4:
        ends += rng.sample(("", "", "!", "...", " :)", "!!", " lol", " haha"), 3)
    elif rng.random() < 0.5:
        ends += ["!"]
    return Voice(
        formality=round(f, 3),
        fillers=tuple(rng.sample(FILLERS, rng.randint(4, 9))), filler_rate=0.08 + 0.3 * casual * rng.random(),
        tags=tuple(rng.sample(TAGS, rng.randint(3, 7))), tag_rate=0.05 + 0.35 * casual * rng.random(),
        contract=min(1.0, 0.15 + casual * 1.1), shorthand=shorthand, shorthand_rate=0.3 + 0.6 * rng.random(),
        lower=0.9 * rng.random() if casual > 0.7 else 0.0, end=tuple(ends),
        typo_rate=(0.005 + 0.05 * casual * rng.random()) if rng.random() < 0.7 else 0.0,
        intensify=0.1 + 0.4 * rng.random(), run_on=0.05 + 0.3 * casual * rng.random(), common=common,
    )
