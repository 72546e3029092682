"""Big tool results, trimmed for the model (after design 002's evidence builder).

A result is split into items (the elements of a JSON list, else paragraphs, else lines);
each item is capped, and the items most relevant to the request — a plain lexical score —
are kept, in their original order, until the round's budget is spent. The model is told what
was left out; the caller keeps the full result. Pure functions.
"""

from __future__ import annotations

import json
import re

ITEM_CHARS = 1_500
ROUND_CHARS = 8_000
WORD = re.compile(r"[a-z0-9_]{3,}")


def _items(content: str) -> list[str]:
    try:
        data = json.loads(content)
    except ValueError:
        data = None
    if isinstance(data, list) and len(data) > 1:
        return [json.dumps(item, ensure_ascii=False) for item in data]
    paragraphs = [p for p in re.split(r"\n\s*\n", content) if p.strip()]
    if len(paragraphs) > 1:
        return paragraphs
    return [line for line in content.splitlines() if line.strip()] or [content]


def _score(item: str, query_words: set[str]) -> float:
    words = WORD.findall(item.lower())
    if not words or not query_words:
        return 0.0
    hits = sum(1 for word in words if word in query_words)
    distinct = len(query_words & set(words))
    return distinct + hits / len(words)


def trim(content: str, *, query: str, budget: int, item_chars: int = ITEM_CHARS) -> str | None:
    """The text the model sees when `content` is over `budget` or holds an item over
    `item_chars` (None: send it whole)."""
    if len(content) <= min(budget, item_chars):
        return None
    items = _items(content)
    if len(content) <= budget and all(len(item) <= item_chars for item in items):
        return None
    query_words = set(WORD.findall(query.lower()))
    capped = [
        item if len(item) <= item_chars else item[:item_chars].rstrip() + " …[item cut]"
        for item in items
    ]
    ranked = sorted(range(len(capped)), key=lambda i: (-_score(capped[i], query_words), i))
    kept: set[int] = set()
    used = 0
    for index in ranked:
        size = len(capped[index]) + 1
        if used + size > budget:
            continue
        kept.add(index)
        used += size
    left_out = len(items) - len(kept)
    cut = sum(1 for i in kept if capped[i] != items[i])
    shown = "\n".join(capped[i] for i in sorted(kept))
    note = (
        f"[Trimmed: {len(content):,} characters in {len(items)} item(s); kept the "
        f"{len(kept)} most relevant to the request"
        + (f", {cut} of them shortened" if cut else "")
        + (f"; left out {left_out}" if left_out else "")
        + ". Ask for a narrower range or a specific item to see more.]"
    )
    return f"{shown}\n{note}" if shown else note


def trim_round(
    contents: list[str], *, query: str, round_chars: int = ROUND_CHARS, item_chars: int = ITEM_CHARS
) -> list[str | None]:
    """Trim a round's results so that together they stay within `round_chars`: small results
    go whole, the big ones share what is left."""
    sizes = [len(content) for content in contents]
    budgets = list(sizes)
    remaining, open_ = round_chars, sorted(range(len(contents)), key=lambda i: sizes[i])
    while open_ and sum(sizes) > round_chars:
        share = remaining // len(open_)
        index = open_.pop(0)
        budgets[index] = min(sizes[index], share)
        remaining -= budgets[index]
    return [
        trim(content, query=query, budget=max(budget, 200), item_chars=item_chars)
        for content, budget in zip(contents, budgets, strict=True)
    ]
