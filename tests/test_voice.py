"""A user's voice (``memsim.scenarios.voice``): stable traits, applied without touching what a turn asserts."""

from __future__ import annotations

import random
import re

from memsim.scenarios.voice import Voice, draw_voice

CASUAL = Voice(formality=0.0, fillers=("honestly,",), filler_rate=1.0, tags=("lol",), tag_rate=1.0, contract=1.0,
               shorthand=(("you", "u"), ("please", "pls")), shorthand_rate=1.0, lower=1.0, end=("",),
               typo_rate=1.0, intensify=1.0, run_on=0.0)
FORMAL = Voice(formality=1.0, fillers=("well,",), filler_rate=0.0, tags=("thanks!",), tag_rate=0.0, contract=0.0,
               shorthand=(), shorthand_rate=0.0, lower=0.0, end=(".",), typo_rate=0.0, intensify=0.0, run_on=0.0)


def test_kept_spans_survive_every_trait_letter_for_letter() -> None:
    text = "I moved to Lisbon 3 days ago. Could you please suggest something for my vegetarian sister?"
    keep = ["Lisbon", "3 days ago", "vegetarian"]
    for seed in range(50):
        out = CASUAL.say(random.Random(seed), text, keep)
        for k in keep:
            assert k in out, (k, out)
        # Every word of five letters or more outside the kept spans was open to a typo; the kept ones are intact.
        assert "vegetarian" in out and "days ago" in out


def test_a_casual_voice_uses_its_traits_and_a_formal_one_spells_things_out() -> None:
    rng = random.Random(0)
    casual = CASUAL.say(rng, "I am sure you can help. Please tell me.", [])
    assert casual.startswith("honestly, ") and casual.endswith(" lol")
    assert re.search(r"\bu\b", casual) and "pls" in casual and "i'm" in casual  # shorthand, contraction, lower case
    formal = FORMAL.say(random.Random(0), "I'm sure you're right, and I don't mind.", [])
    assert formal == "I am sure you are right, and I do not mind."


def test_no_second_discourse_marker_before_one_already_there() -> None:
    out = CASUAL.say(random.Random(1), "So, can you help?", [])
    assert out.lower().startswith("so, can"), out


def test_a_voice_is_drawn_from_the_users_generator_alone() -> None:
    a, b = draw_voice(random.Random(7)), draw_voice(random.Random(7))
    assert a == b
    voices = {draw_voice(random.Random(s)) for s in range(40)}
    assert len({v.fillers for v in voices}) == 40
    # Some users write formally, some text: the traits go with the formality drawn.
    formal = [v for v in voices if v.formality > 0.7]
    casual = [v for v in voices if v.formality < 0.3]
    assert formal and casual
    assert all(not v.shorthand and v.lower == 0 for v in formal)
    assert max(v.contract for v in casual) > min(v.contract for v in formal)
    texts = ["I am not sure what is best. Could you help me plan something for tonight?",
             "I moved to a new flat last week. The commute is shorter from here.",
             "Can you give me a recipe for four people? I have about twenty minutes.",
             "My sister says hi. We talk most weekends, and she always gives me good advice."] * 3
    # Two users do not sound alike: over a dozen turns, every user's renderings differ from every other's.
    signatures = {tuple(v.say(random.Random(i), t, []) for i, t in enumerate(texts)) for v in voices}
    assert len(signatures) == len(voices)
