"""Trimming what a taken-over reply's continuation repeats of the text already shown.

A run that takes over a reply asks the model to go on from the kept text without repeating
it; many models start again anyway, from the beginning or from the last sentence. The
continuation's beginning is held back while it still reads like the kept text from some word
on; once it has run past the end of the kept text, that repeated stretch is dropped, and as
soon as it reads differently everything held is let through. A short coincidence ("and
then") is not a repeat: it must span a few words.
"""

from __future__ import annotations

import re

MIN_REPEAT_CHARS = 16
MIN_REPEAT_WORDS = 3
WORD_START = re.compile(r"(?:^|(?<=\s))\S")


class RepeatTrimmer:
    def __init__(self, kept: str) -> None:
        self.kept = kept
        self.held = ""
        self.trimmed = 0  # characters of repeated text dropped, for the record
        self.deciding = bool(kept.strip())
        self.joining = False  # after a repeat: the kept text's trailing blank joins the rest
        # Where a restart may begin: any word of the kept text.
        self._starts = [m.start() for m in WORD_START.finditer(kept)] if self.deciding else []

    def feed(self, chunk: str) -> str:
        """The part of `chunk` that may go to the tabs now."""
        if not self.deciding:
            if self.joining:
                chunk = chunk.lstrip()
                self.joining = not chunk
            return chunk
        self.held += chunk
        return self._decide(final=False)

    def finish(self) -> str:
        """What is still held when the stream ends."""
        return self._decide(final=True) if self.deciding else ""

    def _decide(self, *, final: bool) -> str:
        text = self.held.lstrip()
        if not text:
            return ""
        pending = False
        repeat = ""
        for start in self._starts:
            candidate = self.kept[start:].rstrip()
            if text.startswith(candidate):  # ran past the end of the kept text: a repeat
                if len(candidate) > len(repeat):
                    repeat = candidate
            elif candidate.startswith(text):
                pending = True  # it still reads like the kept text from here on
        if pending and not final:
            return ""
        self.deciding = False
        held, self.held = self.held, ""
        if len(repeat) < MIN_REPEAT_CHARS or len(repeat.split()) < MIN_REPEAT_WORDS:
            return held
        self.trimmed = len(repeat)
        rest = text[len(repeat) :]
        # The kept text ends where the repeat did; its own trailing blank joins them.
        if self.kept[-1:].isspace():
            rest = rest.lstrip()
            self.joining = not rest
        return rest
