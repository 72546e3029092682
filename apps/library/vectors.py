"""The library's vectors: who makes them, and the exact nearest-neighbour search over them.

An embedder is named `kind:model`: `local:all-MiniLM-L6-v2` (the embedded model, `minilm`)
or a provider's (`openai:text-embedding-3-small`, through the session's credential). Each
document records whose vectors its passages carry; a question is embedded by each embedder
the session's documents use, and compared only with passages of the same one.

The index is the same on both databases: each passage's float32 vector is stored with it (a
BLOB, a bytea), and a search multiplies the question's vector with a matrix of the session's
vectors, held per process and rebuilt when the session's documents change. Why not an index
extension: pgvector cannot be installed for this PostgreSQL here, and sqlite-vec needs an
SQLite that loads extensions, which the usual Python builds do not; and an exact search is
faster at the library's scale (50,000 by 384 in about 8 ms, against 33 ms for sqlite-vec's
own; TECH_NOTES §12), with no approximation to tune.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db.models import Count, Max, Sum

from apps.library import minilm
from apps.library.models import Chunk, Document, DocumentState
from apps.providers.services import credential_embed, credential_embedder
from apps.providers.types import ProviderError

logger = logging.getLogger(__name__)
LOCAL = f"local:{minilm.NAME}"
BATCH = 64  # passages embedded, stored and counted at a time (the panel's progress)
CACHE_BYTES = 512 * 1024 * 1024  # the matrices a process keeps, over all sessions
# Below this cosine a passage is unrelated, however it ranks (the nearest of a library that
# holds nothing on the question is still nearest): all-MiniLM-L6-v2 puts unrelated English
# texts at 0.0 to 0.15.
MIN_SIMILARITY = 0.25
# Questions embedded off the request's thread, while the full text is searched.
EMBEDDING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="library-question")


def embedder_for(session) -> str:
    """Whose vectors a document added to `session` now gets ("" when vectors are off)."""
    choice = settings.PARLEY_LIBRARY_VECTORS
    if choice == "off":
        return ""
    if choice == "auto":
        return credential_embedder(session.credential) or LOCAL
    return LOCAL


def embed(texts: list[str], *, embedder: str, session) -> np.ndarray:
    """Unit vectors (float32) for `texts` by `embedder`; ProviderError when a provider's call
    fails or the session's credential no longer gives that embedder's vectors."""
    if embedder == LOCAL:
        return minilm.encode(texts)
    credential = session.credential
    if credential_embedder(credential) != embedder:
        raise ProviderError(f"This session's credential no longer gives {embedder} vectors.")
    vectors = np.asarray(credential_embed(credential=credential, texts=texts), dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(texts):
        raise ProviderError(f"{embedder} answered {len(vectors)} vectors for {len(texts)} texts.")
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


@dataclass
class _Matrix:
    stamp: tuple
    ids: np.ndarray  # chunk ids, one per row
    vectors: np.ndarray

    @property
    def size(self) -> int:
        return self.vectors.nbytes + self.ids.nbytes


class _Matrices:
    """Each (session, embedder)'s matrix, least recently used dropped past CACHE_BYTES."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[int, str], _Matrix] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: int, embedder: str) -> _Matrix:
        key = (session_id, embedder)
        stamp = _stamp(session_id, embedder)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept.stamp == stamp:
                self._kept.move_to_end(key)
                return kept
        matrix = _load(session_id, embedder, stamp)
        with self._lock:
            self._kept[key] = matrix
            self._kept.move_to_end(key)
            while sum(m.size for m in self._kept.values()) > CACHE_BYTES and len(self._kept) > 1:
                self._kept.popitem(last=False)
        return matrix

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


MATRICES = _Matrices()


def _documents(session_id: int, embedder: str | None = None):
    """The session's ready documents (those whose vectors are `embedder`'s, if given)."""
    ready = Document.objects.filter(session_id=session_id, state=DocumentState.READY)
    return ready if embedder is None else ready.filter(embedder=embedder)


def _stamp(session_id: int, embedder: str) -> tuple:
    """What changes when the session's vectors of `embedder` change (one small query)."""
    seen = _documents(session_id, embedder).aggregate(
        documents=Count("pk"), done=Sum("vectors_done"), read=Max("indexed_at"), last=Max("pk")
    )
    return (seen["documents"], seen["done"], seen["read"], seen["last"])


def _load(session_id: int, embedder: str, stamp: tuple) -> _Matrix:
    rows = Chunk.objects.filter(
        document__in=_documents(session_id, embedder), vector__isnull=False
    ).values_list("pk", "vector")
    ids, blobs = [], []
    for pk, blob in rows.iterator(chunk_size=2000):
        if blob is not None:
            ids.append(pk)
            blobs.append(bytes(blob))
    if not ids:
        return _Matrix(stamp, np.zeros(0, dtype=np.int64), np.zeros((0, 1), dtype=np.float32))
    width = len(blobs[0]) // 4
    kept = [index for index, blob in enumerate(blobs) if len(blob) == width * 4]
    vectors = np.frombuffer(b"".join(blobs[index] for index in kept), dtype=np.float32)
    return _Matrix(
        stamp, np.asarray([ids[i] for i in kept], dtype=np.int64), vectors.reshape(-1, width)
    )


class Asked:
    """A question on its way to vectors: each embedder's embedding of it starts at once, off
    this thread (the embedded model, or a provider's call), so the full-text search runs
    meanwhile; `nearest` then waits for them and searches."""

    def __init__(self, *, session, question: str) -> None:
        self.session = session
        embedders = list(
            _documents(session.pk)
            .exclude(embedder="")
            .order_by()  # else the documents' ordering makes each row distinct
            .values_list("embedder", flat=True)
            .distinct()
        )
        if any(embedder != LOCAL for embedder in embedders):
            session.credential  # noqa: B018 -- loaded here: the embedding thread reads no database
        self.queries = {
            embedder: EMBEDDING.submit(embed, [question], embedder=embedder, session=session)
            for embedder in embedders
        }

    def nearest(self, limit: int) -> list[int]:
        """The ids of the session's passages nearest to the question in meaning, best first,
        over every embedder its documents use (each compared with its own; ranks
        interleaved)."""
        ranked: list[list[int]] = []
        for embedder, pending in self.queries.items():
            matrix = MATRICES.get(self.session.pk, embedder)
            try:
                query = pending.result()[0]
            except ProviderError as exc:
                logger.info("Library search without %s vectors: %s", embedder, exc)
                continue
            if not len(matrix.ids) or query.shape[0] != matrix.vectors.shape[1]:
                continue
            scores = matrix.vectors @ query
            top = min(limit, len(scores))
            best = np.argpartition(-scores, top - 1)[:top]
            best = best[np.argsort(-scores[best])]
            ranked.append([int(matrix.ids[i]) for i in best if scores[i] >= MIN_SIMILARITY])
        merged: list[int] = []
        for place in range(limit):
            merged.extend(ids[place] for ids in ranked if place < len(ids))
        return merged[:limit]


def nearest(*, session, question: str, limit: int) -> list[int]:
    return Asked(session=session, question=question).nearest(limit)


def document_embed(document: Document) -> None:
    """Give the document's passages vectors, BATCH at a time, counting as it goes; when the
    provider's call fails, the embedded model's are taken and the reason kept."""
    embedder = document.embedder
    done = 0
    chunks = list(Chunk.objects.filter(document=document).order_by("seq").only("pk", "text"))
    for start in range(0, len(chunks), BATCH):
        batch = chunks[start : start + BATCH]
        try:
            vectors = embed(
                [chunk.text for chunk in batch], embedder=embedder, session=document.session
            )
        except ProviderError as exc:
            if embedder == LOCAL:
                raise
            logger.info("Library document %s: %s vectors failed: %s", document.pk, embedder, exc)
            note = f"{embedder} failed ({str(exc)[:200]}); the embedded model's vectors are used."
            Chunk.objects.filter(document=document).update(vector=None)
            Document.objects.filter(pk=document.pk).update(
                embedder=LOCAL, vectors_done=0, vectors_note=note
            )
            document.embedder = LOCAL
            return document_embed(document)
        for chunk, vector in zip(batch, vectors, strict=True):
            chunk.vector = vector.astype(np.float32).tobytes()
        Chunk.objects.bulk_update(batch, ["vector"])
        done += len(batch)
        if not Document.objects.filter(pk=document.pk).update(vectors_done=done):
            return  # removed meanwhile
