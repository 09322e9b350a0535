"""Word-level helpers that the ``life`` world's text modules share: a uniform pick, a noun with its article."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

__all__ = ["pick", "a_or_an"]


def pick(rng: random.Random, options: Sequence[Any]) -> Any:
    """One of ``options``, uniformly."""
    return options[rng.randrange(len(options))]


def a_or_an(noun: str) -> str:
    """``noun`` with its indefinite article, as it sounds ("an apology email", "a UX researcher")."""
    low = noun.lower()
    vowel = low[:1] in "aeiou" and not low.startswith(("ux", "uni", "use", "usu", "eu", "one"))  # "a UX researcher"
    return ("an " if vowel else "a ") + noun
