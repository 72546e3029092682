"""Hybrid search over a session's library: full text and vectors, fused by rank.

Full text is the database's own engine: SQLite's FTS5 (bm25, the heading weighted twice the
text) or PostgreSQL's full-text search (ts_rank over the stored vector, the heading weighted
A). A question's words are looked up with OR and ranked, so a passage holding more of them,
more often, comes first; common English words are left out (both engines rank them as noise).
Vectors find passages that say the same in other words (`vectors.nearest`). The two rankings
are fused by reciprocal rank (each passage scores the sum of 1 / (RRF_K + its rank) in each),
which needs no calibration between a bm25 score and a cosine; a hit is then read with its
neighbours where it needs them (`passages`)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from django.db import connection

from apps.library.models import Chunk, DocumentState
from apps.library.passages import passage_text, passages_of

MAX_TERMS = 16
# A word in more passages than COMMON_PASSAGES and than COMMON_SHARE of them all is left out
# of the lookup, as a common word is: it barely moves the ranking, and ranking every passage
# it is in was most of a search's time (at 50,000 passages, p95 26 -> 12 ms on SQLite and
# 74 -> 18 ms on PostgreSQL). SQLite counts it (stopping at the limit); PostgreSQL's own
# statistics of the column (ANALYZE's most common lexemes, with the share of rows holding
# each) say it. A small library never loses a word this way.
COMMON_PASSAGES = 2500
COMMON_SHARE = 0.05
STATISTICS_SECONDS = 60.0
CANDIDATES = 40  # taken from each ranking before fusion
RRF_K = 60  # the usual constant: a rank's weight falls slowly, so both rankings count
TERM = re.compile(r"\w+", re.U)
COMMON = (
    "a an and are as at be but by can could did do does for from had has have how i if in into "
    "is it its me my of on or our so than that the their them then there these they this to "
    "was we were what when where which who why will with would you your"
)
STOP_WORDS = frozenset(COMMON.split())


@dataclass(frozen=True)
class Hit:
    chunk: Chunk  # the passage found, cited by its mark
    score: float  # fused: higher is better
    parts: tuple[Chunk, ...] = ()  # the chunk, with the neighbours it is read with

    @property
    def text(self) -> str:
        return passage_text(list(self.parts or (self.chunk,)))


def query_terms(question: str) -> list[str]:
    """The words a question is looked up by: lower case, without common words, each once."""
    words = [word.lower() for word in TERM.findall(question)]
    kept = [word for word in words if word not in STOP_WORDS] or words
    return list(dict.fromkeys(kept))[:MAX_TERMS]


def library_search(
    *, session, question: str, limit: int = 8, words: bool = True, vectors: bool = True
) -> list[Hit]:
    """The session's ready documents' passages that best answer `question`, best first: full
    text and vectors (each can be left out: the benchmark weighs them), fused; a passage
    already read as part of a better one's neighbours is not given twice."""
    from apps.library.vectors import Asked  # numpy: only once a library is searched

    asked = (
        Asked(session=session, question=question[:2000]) if vectors and question.strip() else None
    )
    rankings = []
    if words:
        rankings.append(
            full_text_ranked(session_id=session.pk, question=question, limit=CANDIDATES)
        )
    if asked is not None:
        rankings.append(asked.nearest(CANDIDATES))
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, pk in enumerate(ranking):
            scores[pk] = scores.get(pk, 0.0) + 1.0 / (RRF_K + rank + 1)
    best = sorted(scores, key=lambda pk: (-scores[pk], pk))[: limit * 2]
    chunks = Chunk.objects.select_related("document__session").defer("vector").in_bulk(best)
    found = [chunks[pk] for pk in best if pk in chunks]
    passages = passages_of(found)
    hits: list[Hit] = []
    read: set[tuple[int, int]] = set()
    for chunk in found:
        if (chunk.document_id, chunk.seq) in read:
            continue
        parts = passages[chunk.pk]
        read.update((part.document_id, part.seq) for part in parts)
        hits.append(Hit(chunk, scores[chunk.pk], tuple(parts)))
        if len(hits) == limit:
            break
    return hits


def full_text_ranked(*, session_id: int, question: str, limit: int) -> list[int]:
    """The ids of the session's passages that best match `question`'s words, best first."""
    terms = query_terms(question)
    if not terms:
        return []
    if connection.vendor == "postgresql":
        # The GIN index finds the passages, then the session's documents (an array) filter
        # them: with a join the planner scanned the index once per document (4 s at 50,000
        # passages), and with the array on the document index it read every passage of the
        # session (47 ms); `+ 0` keeps it off that index (7 ms). ts_rank, not ts_rank_cd:
        # cover density costs twice as much over many matches.
        sql = (
            "SELECT c.id, ts_rank(c.search, q) AS score FROM library_chunk c, "
            "to_tsquery('english', %s) q WHERE c.search @@ q AND c.document_id + 0 = ANY(ARRAY("
            "SELECT id FROM library_document WHERE session_id = %s AND state = %s)) "
            "ORDER BY score DESC, c.id LIMIT %s"
        )
        lookup = " | ".join(_not_common_pg(terms))  # words only (TERM): nothing to escape
    else:
        sql = (
            "SELECT c.id, -bm25(library_chunk_fts, 1.0, 2.0) AS score FROM library_chunk_fts "
            "JOIN library_chunk c ON c.id = library_chunk_fts.rowid "
            "JOIN library_document d ON d.id = c.document_id "
            "WHERE library_chunk_fts MATCH %s AND d.session_id = %s AND d.state = %s "
            "ORDER BY score DESC, c.id LIMIT %s"
        )
        terms = _not_common(terms)
        lookup = " OR ".join(f'"{term}"' for term in terms)  # quoted: words, never operators
    with connection.cursor() as cursor:
        cursor.execute(sql, [lookup, session_id, DocumentState.READY.value, limit])
        ranked = cursor.fetchall()
    return [pk for pk, _ in ranked]


def _not_common(terms: list[str]) -> list[str]:
    """The terms that are not in most of the index's passages (SQLite's FTS5 counts each up
    to the limit, in well under a millisecond); all of them if every one is."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(id) FROM library_chunk")
        limit = max(COMMON_PASSAGES, int((cursor.fetchone()[0] or 0) * COMMON_SHARE))
        kept = []
        for term in terms:
            cursor.execute(
                "SELECT count(*) FROM (SELECT 1 FROM library_chunk_fts "
                "WHERE library_chunk_fts MATCH %s LIMIT %s)",
                [f'"{term}"', limit + 1],
            )
            if cursor.fetchone()[0] <= limit:
                kept.append(term)
    return kept or terms


_lexeme_shares: tuple[float, dict[str, float]] = (0.0, {})


def _not_common_pg(terms: list[str]) -> list[str]:
    """The terms whose lexemes are not common by PostgreSQL's own statistics (read once a
    minute); all of them if every one is, or before the column has been analysed."""
    global _lexeme_shares
    read_at, shares = _lexeme_shares
    with connection.cursor() as cursor:
        if time.monotonic() - read_at > STATISTICS_SECONDS:
            cursor.execute(
                "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, "
                "c.reltuples FROM pg_stats s JOIN pg_class c ON c.relname = s.tablename "
                "WHERE s.tablename = 'library_chunk' AND s.attname = 'search'"
            )
            row = cursor.fetchone()
            floor = COMMON_PASSAGES / row[2] if row and row[2] and row[2] > 0 else 1.0
            shares = (
                {lexeme: share for lexeme, share in zip(row[0], row[1], strict=False)
                 if share > max(COMMON_SHARE, floor)}
                if row and row[0] else {}
            )  # fmt: skip
            _lexeme_shares = (time.monotonic(), shares)
        if not shares:
            return terms
        cursor.execute(
            "SELECT word, array(SELECT lexeme FROM unnest(to_tsvector('english', word))) "
            "FROM unnest(%s::text[]) AS word",
            [terms],
        )
        stems = dict(cursor.fetchall())
    kept = [term for term in terms if not any(stem in shares for stem in stems.get(term, []))]
    return kept or terms
