"""Full-text search over a session's library, in the database's own engine: SQLite's FTS5
(bm25, the heading weighted twice the text) or PostgreSQL's full-text search (ts_rank_cd over
the stored vector, the heading weighted A). A question's words are looked up with OR and
ranked, so a passage holding more of them, more often, comes first; common English words are
left out of the lookup (both engines would rank them as noise)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connection

from apps.library.models import Chunk, DocumentState

MAX_TERMS = 16
TERM = re.compile(r"\w+", re.U)
COMMON = (
    "a an and are as at be but by can could did do does for from had has have how i if in into "
    "is it its me my of on or our so than that the their them then there these they this to "
    "was we were what when where which who why will with would you your"
)
STOP_WORDS = frozenset(COMMON.split())


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float  # higher is better, on this engine's own scale


def query_terms(question: str) -> list[str]:
    """The words a question is looked up by: lower case, without common words, each once."""
    words = [word.lower() for word in TERM.findall(question)]
    kept = [word for word in words if word not in STOP_WORDS] or words
    return list(dict.fromkeys(kept))[:MAX_TERMS]


def library_search(*, session_id: int, question: str, limit: int = 8) -> list[Hit]:
    """The session's ready documents' chunks that best match `question`, best first."""
    terms = query_terms(question)
    if not terms:
        return []
    if connection.vendor == "postgresql":
        sql = (
            "SELECT c.id, ts_rank_cd(c.search, q) AS score FROM library_chunk c "
            "JOIN library_document d ON d.id = c.document_id, to_tsquery('english', %s) q "
            "WHERE c.search @@ q AND d.session_id = %s AND d.state = %s "
            "ORDER BY score DESC, c.id LIMIT %s"
        )
        lookup = " | ".join(terms)  # words only (TERM): nothing to escape
    else:
        sql = (
            "SELECT c.id, -bm25(library_chunk_fts, 1.0, 2.0) AS score FROM library_chunk_fts "
            "JOIN library_chunk c ON c.id = library_chunk_fts.rowid "
            "JOIN library_document d ON d.id = c.document_id "
            "WHERE library_chunk_fts MATCH %s AND d.session_id = %s AND d.state = %s "
            "ORDER BY score DESC, c.id LIMIT %s"
        )
        lookup = " OR ".join(f'"{term}"' for term in terms)  # quoted: words, never operators
    with connection.cursor() as cursor:
        cursor.execute(sql, [lookup, session_id, DocumentState.READY.value, limit])
        ranked = cursor.fetchall()
    chunks = Chunk.objects.select_related("document").in_bulk([pk for pk, _ in ranked])
    return [Hit(chunks[pk], float(score)) for pk, score in ranked if pk in chunks]
