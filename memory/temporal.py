"""Temporal markers: the patterns by which the multi-signal gate stores a turn that says *when*.

Two vocabularies: ``published``, the list of date, relative-time and clock
patterns of the published gated-memory systems plus the whole words started,
began, moved, changed, recently, just, ago and since; and ``extended``,
memsim's earlier list (``markers="extended"``).
"""

from __future__ import annotations

import re

from memsim.core.errors import UserError

__all__ = ["TEMPORAL_VOCABULARIES", "temporal_markers"]

# -- temporal markers: the published vocabulary -------------------------------

_P_MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_P_DOW = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_P_NUM = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+)"

# (name, pattern, flags). Case-insensitive where the published gate is; whole words throughout.
_PUBLISHED: tuple[tuple[str, str, int], ...] = (
    ("date_month_day", rf"\b{_P_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b", re.IGNORECASE),
    ("date_day_month", rf"\b\d{{1,2}}\s+{_P_MONTH}(?:\s+\d{{4}})?\b", re.IGNORECASE),
    ("date_numeric", r"\b\d{1,2}[/-]\d{1,2}[/-]\d{2,4}\b", 0),
    ("date_iso", r"\b\d{4}[-/]\d{1,2}[-/]\d{1,2}\b", 0),
    (
        "relative_named",
        rf"\b(?:last|next|this|past)\s+(?:{_P_DOW}|week|month|year|spring|summer|fall|autumn|winter|semester|quarter)\b",
        re.IGNORECASE,
    ),
    ("relative_day", r"\b(?:yesterday|tomorrow|today|tonight)\b", re.IGNORECASE),
    (
        "relative_ago",
        rf"\b{_P_NUM}\s+(?:day|week|month|year|hour|minute|decade)s?\s+(?:ago|from\s+now|later|earlier|back)\b",
        re.IGNORECASE,
    ),
    ("clock", r"\bat\s+\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)\b", re.IGNORECASE),
    ("part_of_day", r"\bin\s+the\s+(?:morning|afternoon|evening|night)\b", re.IGNORECASE),
    ("clock_named", r"\bat\s+(?:noon|midnight|dawn|dusk)\b", re.IGNORECASE),
    ("keyword", r"\b(?:started|began|moved|changed|recently|just|ago|since)\b", re.IGNORECASE),
)

# -- temporal markers: memsim's extended vocabulary (``markers="extended"``) --

_MONTHS = (
    "January|February|March|April|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_NUM = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a few|several|couple of)"
_UNIT = r"(?:second|minute|hour|day|night|week|weekend|month|year|decade)s?"
_SEASON = r"(?:spring|summer|autumn|fall|winter)"
_DAYS = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)s?"

# (name, pattern, flags). Month and day names are matched capitalised only,
# so that "may", "march" and "sat" as ordinary words do not count.
_EXTENDED: tuple[tuple[str, str, int], ...] = (
    ("date_iso", r"\b\d{4}-\d{1,2}-\d{1,2}\b", 0),
    ("date_slash", r"\b\d{1,2}[/.]\d{1,2}[/.](?:\d{4}|\d{2})\b", 0),
    ("date_month", rf"\b(?:{_MONTHS}|May)\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS}|May)\b", 0),
    ("month", rf"\b(?:{_MONTHS})\b|\b(?:in|of|since|last|next|this|early|late|mid-?)\s+May\b|\bMay\s+\d{{4}}\b", 0),
    ("weekday", rf"\b{_DAYS}\b", 0),
    ("year", r"\b(?:in|since|from|until|by|of)\s+(?:19|20)\d{2}\b", re.IGNORECASE),
    ("relative_ago", rf"\b{_NUM}\s+{_UNIT}\s+(?:ago|before|later|earlier)\b", re.IGNORECASE),
    ("relative_in", rf"\b(?:in|for|within|after)\s+{_NUM}\s+{_UNIT}\b", re.IGNORECASE),
    (
        "relative_named",
        rf"\b(?:last|next|this|past|coming|previous|following)\s+(?:{_UNIT}|{_SEASON}|{_DAYS})\b",
        re.IGNORECASE,
    ),
    ("relative_day", r"\b(?:yesterday|tomorrow|tonight|today|the other day|the day before|recently|lately)\b", re.IGNORECASE),
    ("clock", r"\b\d{1,2}:\d{2}\b|\b\d{1,2}\s?(?:am|pm|a\.m\.|p\.m\.)|\bo'clock\b", re.IGNORECASE),
    (
        "change",
        r"\b(?:start(?:ed|ing)?|began|begun|moved|moving|since|quit|changed|switched|"
        r"stopped|joined|graduated|married|divorced|retired|adopted|bought|sold|"
        r"no longer|anymore|used to)\b",
        re.IGNORECASE,
    ),
)


TEMPORAL_VOCABULARIES: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "published": tuple((n, re.compile(p, f)) for n, p, f in _PUBLISHED),
    "extended": tuple((n, re.compile(p, f)) for n, p, f in _EXTENDED),
}
"""Compiled temporal-marker patterns by vocabulary name: ``published`` (default) and ``extended``."""


def temporal_markers(text: str, vocabulary: str = "published") -> list[str]:
    """Names of the temporal-marker patterns of ``vocabulary`` that match ``text`` (empty: none).

    ``published``: month-name dates ("May 7, 2023", "7 May"), numeric and ISO
    dates, "last/next/this/past" + weekday, week, month, year or season,
    yesterday/today/tomorrow/tonight, "<n> <unit>s ago/from now/later/
    earlier/back", "at 3pm", "in the morning", "at noon", and the whole words
    started, began, moved, changed, recently, just, ago, since (``keyword``).

    ``extended`` (memsim's earlier list): capitalised month and weekday names
    alone, years after a preposition, "in two weeks", "the other day",
    clock times, and change words (quit, joined, no longer, used to, ...).

    Raises:
        UserError: unknown vocabulary.
    """
    try:
        patterns = TEMPORAL_VOCABULARIES[vocabulary]
    except KeyError:
        raise UserError(
            f"unknown temporal-marker vocabulary {vocabulary!r}; known: {', '.join(sorted(TEMPORAL_VOCABULARIES))}"
        ) from None
    return [name for name, rx in patterns if rx.search(text)]
