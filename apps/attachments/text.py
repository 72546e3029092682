"""Text every database can store: what comes from outside (a file, a card, a model) passes
here before it is saved."""

from __future__ import annotations

import re

# NUL and lone surrogates: PostgreSQL stores neither in text or JSON (a paired surrogate is one
# code point above U+FFFF in a Python string, so anything in this range is unpaired).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def storable(text: str) -> str:
    """The text with every character no database can store replaced by U+FFFD."""
    return UNSTORABLE.sub(REPLACEMENT, text) if UNSTORABLE.search(text) else text
