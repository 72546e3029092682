"""A session's library through the API (what `parley library` uses): its documents with their
state, adding documents, removing one, and searching it as the roles do. Reads for anyone in
the room; changes for its members and owner, with a post token."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.core.exceptions import ValidationError
from ninja import Field, File, Query, Router, Schema, Status
from ninja.files import UploadedFile

from apps.api.auth import require_post_scope
from apps.api.schemas import ERRORS, Error, Refused
from apps.chat.access import Need, reach
from apps.chat.display.citations import passage_url
from apps.chat.records.library import library_add, library_remove
from apps.chat.selectors import sessions_for_user
from apps.library.models import Document
from apps.library.search import library_search

router = Router()
MAX_DOCUMENTS_AT_ONCE = 100


class DocumentOut(Schema):
    id: UUID
    name: str
    size: int
    state: str  # queued, indexing, ready or failed
    error: str
    pages: int | None
    passages: int
    vectors: str  # whose: "local:all-MiniLM-L6-v2", "openai:text-embedding-3-small"; "" none
    vectors_done: int  # passages with their vector so far (searchable by words already)
    vectors_note: str  # why the embedded model's vectors were taken, if they were
    created_at: datetime


class SearchQuery(Schema):
    q: str = Field(..., min_length=1, max_length=2000, description="The question, in words")
    limit: int = Field(8, ge=1, le=50, description="At most this many passages")


class PassageOut(Schema):
    mark: str  # "L123": how a role cites it
    document: UUID
    document_name: str
    page: int | None
    heading: str
    text: str  # as the roles read it (a short passage with its neighbours)
    url: str  # the passage in the web page


def document_out(document: Document) -> DocumentOut:
    return DocumentOut(
        id=document.public_id, name=document.name, size=document.size, state=document.state,
        error=document.error, pages=document.pages, passages=document.chunks_count,
        vectors=document.embedder, vectors_done=document.vectors_done,
        vectors_note=document.vectors_note, created_at=document.created_at,
    )  # fmt: skip


def _session(request, session_id: UUID, need: Need):
    return reach(sessions_for_user, user=request.user, need=need, public_id=session_id)


@router.get(
    "/sessions/{session_id}/library",
    response={200: list[DocumentOut], **ERRORS},
    summary="A session's library",
)
def list_documents(request, session_id: UUID):
    """Its documents, each with its state: `queued` and `indexing` while a worker reads it,
    then `ready` (with its pages and passages) or `failed` (with the reason in `error`)."""
    session = _session(request, session_id, Need.READ)
    return [document_out(d) for d in Document.objects.filter(session=session)]


@router.get(
    "/sessions/{session_id}/library/search",
    response={200: list[PassageOut], **ERRORS},
    summary="Search a session's library",
)
def search_library(request, session_id: UUID, asked: Query[SearchQuery]):
    """The passages that best answer `q`, best first, found as the roles' `library_search`
    finds them: by their words and by meaning, fused. Each has its mark (cite it as `[L123]`
    in a message and the reply's link opens it), its document, page and section."""
    session = _session(request, session_id, Need.READ)
    hits = library_search(session=session, question=asked.q, limit=asked.limit)
    return [
        PassageOut(
            mark=f"L{hit.chunk.pk}", document=hit.chunk.document.public_id,
            document_name=hit.chunk.document.name, page=hit.chunk.page,
            heading=hit.chunk.heading, text=hit.text,
            url=request.build_absolute_uri(passage_url(hit.chunk)),
        )
        for hit in hits
    ]  # fmt: skip


@router.post(
    "/sessions/{session_id}/library",
    response={201: list[DocumentOut], **ERRORS, 422: Error},
    summary="Add documents to a session's library",
)
def add_documents(
    request,
    session_id: UUID,
    files: list[UploadedFile] = File(..., min_length=1, max_length=MAX_DOCUMENTS_AT_ONCE),  # noqa: B008
):
    """PDFs (with a text layer), Word documents, Markdown, text, HTML, CSV and source files
    as multipart `files`; each is read in the background (poll the library for its state). A
    file the library refuses (empty, too big, there already, over the session's quota) is
    said in `detail`; the ones before it are kept."""
    require_post_scope(request)
    session = _session(request, session_id, Need.TALK)
    added = []
    for upload in files:
        try:
            name, data = upload.name or "document", upload.read()
            added.append(library_add(session=session, by=request.user, name=name, data=data))
        except ValidationError as exc:
            kept = f" ({len(added)} added before it)" if added else ""
            raise Refused(422, " ".join(exc.messages) + kept, "files") from None
    return Status(201, [document_out(document) for document in added])


@router.delete(
    "/sessions/{session_id}/library/{document_id}",
    response={204: None, **ERRORS},
    summary="Remove a document from a session's library",
)
def remove_document(request, session_id: UUID, document_id: UUID):
    require_post_scope(request)
    session = _session(request, session_id, Need.TALK)
    document = Document.objects.filter(session=session, public_id=document_id).first()
    if document is None:
        raise Refused(404, "No such document in this library.", "document_id")
    library_remove(document=document)
    return Status(204, None)
