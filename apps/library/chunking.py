"""Sections cut into chunks for search: about CHUNK_WORDS words each, cut at a paragraph or a
sentence where one is near, never across a page or a heading (a chunk has one place to cite).
Each chunk keeps its character range in the document's text, so a hit can be shown in place
and joined with its neighbours. No database here."""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.library.extraction import Section

CHUNK_WORDS = 180
# A chunk's cut looks for a paragraph, then a sentence end, in its last quarter.
LOOK_BACK = 0.25
SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*\s")
WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Chunk:
    text: str
    page: int | None
    heading: str
    start: int  # in the document's text
    end: int


def chunks_of(sections: list[Section], *, words: int = CHUNK_WORDS) -> list[Chunk]:
    found: list[Chunk] = []
    for section in _places(sections):
        found += _cut(section, words)
    return found


def _places(sections: list[Section]) -> list[Section]:
    """Consecutive sections of one place (a heading's paragraphs, a page's) as one, so that
    short paragraphs are read together; their text is joined as the document's text is
    (a blank line between), so the character ranges still hold."""
    joined: list[Section] = []
    for section in sections:
        last = joined[-1] if joined else None
        if last is not None and (last.page, last.heading) == (section.page, section.heading):
            gap = section.start - (last.start + len(last.text))
            if gap == 2:
                joined[-1] = Section(last.text + "\n\n" + section.text, last.page,
                                     last.heading, last.start)  # fmt: skip
                continue
        joined.append(section)
    return joined


def _cut(section: Section, words: int) -> list[Chunk]:
    text = section.text
    spans = [match.span() for match in WORD.finditer(text)]
    pieces: list[Chunk] = []
    first = 0
    while first < len(spans):
        last = min(first + words, len(spans)) - 1
        if last < len(spans) - 1:  # not the section's end: look back for a better cut
            last = _better_cut(text, spans, first, last)
        start, end = spans[first][0], spans[last][1]
        pieces.append(
            Chunk(text[start:end], section.page, section.heading, section.start + start,
                  section.start + end)
        )  # fmt: skip
        first = last + 1
    return pieces


def _better_cut(text: str, spans: list[tuple[int, int]], first: int, last: int) -> int:
    """The last word of the chunk: the end of a paragraph, else of a sentence, in the last
    quarter of the words; else the word count's own cut."""
    floor = last - int((last - first + 1) * LOOK_BACK)
    for rule in (_ends_paragraph, _ends_sentence):
        for index in range(last, max(first, floor) - 1, -1):
            if rule(text, spans, index):
                return index
    return last


def _ends_paragraph(text: str, spans: list[tuple[int, int]], index: int) -> bool:
    gap = text[spans[index][1] : spans[index + 1][0]] if index + 1 < len(spans) else ""
    return gap.count("\n") >= 2


def _ends_sentence(text: str, spans: list[tuple[int, int]], index: int) -> bool:
    end = spans[index][1]
    return SENTENCE_END.match(text, end - 1) is not None or text[end - 1] in ".!?\u2026"
