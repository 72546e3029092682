"""A hit as it is read: a short passage joined with its neighbours in the same section.

A chunk that is short (a heading's one paragraph, a table's last rows, a list's tail) is
rarely understood alone: it is read with the chunks before and after it when they are under
the same heading on the same page, up to JOINED_WORDS. The rule depends on the chunk alone,
never on the question, so the passage a role was shown is the one its quotation is checked
against and the one a citation opens.
"""

from __future__ import annotations

from django.db.models import Q

from apps.library.chunking import CHUNK_WORDS
from apps.library.models import Chunk

SHORT_WORDS = 80
JOINED_WORDS = 2 * CHUNK_WORDS


def passages_of(chunks: list[Chunk]) -> dict[int, list[Chunk]]:
    """Each chunk's passage, as the chunks it is made of in order (itself alone, or with a
    neighbour or two); one query for all of them."""
    short = [chunk for chunk in chunks if _words(chunk.text) < SHORT_WORDS]
    near: dict[tuple[int, int], Chunk] = {}
    if short:
        wanted = Q()
        for chunk in short:
            wanted |= Q(document_id=chunk.document_id, seq__in=(chunk.seq - 1, chunk.seq + 1))
        for found in Chunk.objects.filter(wanted).defer("vector"):
            near[(found.document_id, found.seq)] = found
    passages = {}
    for chunk in chunks:
        parts = [chunk]
        if _words(chunk.text) < SHORT_WORDS:
            words = _words(chunk.text)
            for step in (-1, 1):
                neighbour = near.get((chunk.document_id, chunk.seq + step))
                if neighbour is None or not _same_section(neighbour, chunk):
                    continue
                if words + _words(neighbour.text) > JOINED_WORDS:
                    continue
                words += _words(neighbour.text)
                parts.insert(0, neighbour) if step < 0 else parts.append(neighbour)
        passages[chunk.pk] = parts
    return passages


def passage_text(parts: list[Chunk]) -> str:
    return "\n\n".join(part.text for part in parts)


def _words(text: str) -> int:
    return len(text.split())


def _same_section(one: Chunk, other: Chunk) -> bool:
    return (one.heading, one.page) == (other.heading, other.page)
