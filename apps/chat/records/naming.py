"""Automatic thread names: 3-6 salient words of the first substantive message (<= 60 chars)."""

from __future__ import annotations

import re

CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.S)
NOISE = re.compile(r"https?://\S+|(?<![\w.])@[\w-]+|[#*_>\[\]()~|]")
WORD = re.compile(r"[^\W_][\w'\u2019-]*", re.U)
_STOPWORD_TEXT = """
    a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just let me
    more most my no nor not now of off on once only or other our ours out over own please same
    she should so some such than that the their them then there these they this those through
    to too under until up very was we were what when where which while who whom why will with
    would you your yours hi hello hey thanks thank ok okay yes yeah sure think tell give make
    want need know like get got let's lets us can't don't i'm it's what's"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
MAX_CHARS = 60


def salient_words(text: str) -> list[str]:
    text = NOISE.sub(" ", CODE.sub(" ", text))
    return [w for w in WORD.findall(text) if w.lower() not in STOPWORDS and len(w) > 1]


def thread_name(text: str) -> str:
    """A short name, or "" when the message has too little substance (e.g. "hi")."""
    words = salient_words(text)
    if len(words) < 2:
        return ""
    chosen: list[str] = []
    for word in words[:6]:
        if len(" ".join([*chosen, word])) > MAX_CHARS:
            break
        chosen.append(word)
    if len(chosen) < 2:
        return words[0][:MAX_CHARS]
    name = " ".join(chosen)
    return name[0].upper() + name[1:]


def unique_name(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    for number in range(2, 1000):
        suffix = f" {number}"
        candidate = name[: MAX_CHARS - len(suffix)].rstrip() + suffix
        if candidate not in taken:
            return candidate
    return name
