"""Thin views for a session's library, a section of the Files dialog: its documents and
their state, adding documents (uploaded, or from the workspace), re-reading and removing.
The room's rules: whoever reads the session sees the list; members and the owner change it."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from django.core.exceptions import ValidationError
from django.core.files.storage import default_storage
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_POST

from apps.attachments import bounded
from apps.chat.access import Need, room_access
from apps.chat.models import AttachmentKind
from apps.chat.records.library import (
    MAX_DOCUMENT_BYTES,
    library_add,
    library_from_attachment,
    library_remove,
    library_reread,
)
from apps.chat.records.sessions import session_workspace
from apps.chat.selectors import attachments_for_user
from apps.chat.web.attachments_views import attachment_for
from apps.chat.web.lookup import session_for
from apps.library.extraction import DOCUMENT_SUFFIXES
from apps.library.models import Chunk, Document, DocumentState
from apps.library.passages import passage_text, passages_of
from apps.library.selectors import stored_name
from apps.workspace.files import WorkspaceError

MAX_DOCUMENTS_AT_ONCE = 100

# A quote mark or a dash matches any of its kind (a model and a PDF rarely agree on them).
QUOTES, DASHES = "\"'\u201c\u201d\u2018\u2019\u00ab\u00bb", "-\u2013\u2014\u2010\u2011"
LOOSE = {c: f"[{re.escape(QUOTES)}]" for c in QUOTES} | {
    c: f"[{re.escape(DASHES)}]" for c in DASHES
}


def panel_html(request, session) -> SafeString:
    """The library's section as the Files dialog shows it (rendered, so escaped, here)."""
    return mark_safe(_panel(request, session).content.decode())  # noqa: S308


def _panel(request, session, *, error: str = "", status: int = 200):
    documents = list(Document.objects.filter(session=session))
    reading = any(
        d.state in (DocumentState.QUEUED, DocumentState.INDEXING) or d.embedding for d in documents
    )
    can_change = room_access(user=request.user, session=session) in ("owner", "member")
    context = {
        "session": session,
        "documents": documents,
        "reading": reading,
        "can_change": can_change,
        "from_messages": _from_messages(request.user, session, documents) if can_change else [],
        "accept": ",".join(sorted(DOCUMENT_SUFFIXES)),
        "error": error,
    }
    return render(request, "chat/_library.html", context, status=status)


def _from_messages(user, session, documents: list[Document]) -> list:
    """The PDFs and text files of the session's messages this person sees that are not in
    the library yet (newest first): each can be added with one click."""
    held = {document.sha256 for document in documents}
    found = (
        attachments_for_user(user=user, need=Need.TALK)
        .filter(session=session, message__isnull=False,
                kind__in=(AttachmentKind.PDF, AttachmentKind.TEXT))
        .select_related("message")
        .order_by("-created_at")
    )  # fmt: skip
    fresh: dict[str, object] = {}
    for attachment in found[:200]:
        if attachment.sha256 not in held:
            fresh.setdefault(attachment.sha256, attachment)
    return list(fresh.values())[:30]


def _document(session, public_id: str) -> Document:
    document = Document.objects.filter(session=session, public_id=public_id).first()
    if document is None:
        raise Http404("No such document in this library.")
    return document


@require_GET
def library_panel(request, session):
    return _panel(request, session_for(request, session, Need.READ))


@require_POST
def library_upload(request, session):
    """Each uploaded file (or a folder's) into the library. A file the library does not read
    (a folder's pictures) is left out and named; one refused file is said, the others added."""
    session = session_for(request, session, Need.TALK)
    uploads = request.FILES.getlist("documents")
    if not uploads:
        return _panel(request, session, error="Choose one or more documents.", status=422)
    if len(uploads) > MAX_DOCUMENTS_AT_ONCE:
        error = f"Add at most {MAX_DOCUMENTS_AT_ONCE} documents at once."
        return _panel(request, session, error=error, status=422)
    problems, skipped, added = [], [], 0
    for upload in uploads:
        name = upload.name or "document"
        if PurePosixPath(name.lower()).suffix not in DOCUMENT_SUFFIXES:
            skipped.append(name)
            continue
        if (upload.size or 0) > MAX_DOCUMENT_BYTES:
            problems.append(f"“{name}” is over {MAX_DOCUMENT_BYTES // 1_048_576} MB.")
            continue
        try:
            library_add(session=session, by=request.user, name=name, data=upload.read())
            added += 1
        except ValidationError as exc:
            problems.append(" ".join(exc.messages))
    if skipped:
        names = ", ".join(f"“{name}”" for name in skipped[:5]) + (" …" if len(skipped) > 5 else "")
        many = "s" if len(skipped) > 1 else ""
        problems.append(f"Left out {len(skipped)} file{many} the library does not read: {names}.")
    status = 422 if problems and not added else 200
    return _panel(request, session, error=" ".join(problems), status=status)


@require_POST
def library_from_files(request, session):
    """A file of the session's workspace, added to its library."""
    session = session_for(request, session, Need.TALK)
    path = request.POST.get("path", "")
    workspace = session_workspace(session)
    try:
        if workspace.size(path) > MAX_DOCUMENT_BYTES:
            raise WorkspaceError(f"“{path}” is over {MAX_DOCUMENT_BYTES // 1_048_576} MB.")
        with workspace.open(path) as handle:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
        library_add(session=session, by=request.user, name=path, data=data)
    except (WorkspaceError, ValidationError) as exc:
        said = " ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
        return _panel(request, session, error=said, status=422)
    return _panel(request, session)


@require_POST
def library_from_message(request, attachment):
    """A sent message's PDF or text file into its session's library: answered with the
    library's panel (the Files dialog) or a sentence (the lightbox). A whispered file is
    refused with 409 and who would see it, until the person adds it for everyone."""
    found = attachment_for(request, attachment, Need.TALK)
    from_panel = request.htmx and request.htmx.target == "library-panel"
    try:
        library_from_attachment(
            attachment=found, by=request.user, for_everyone=request.POST.get("everyone") == "1"
        )
    except ValidationError as exc:
        said = " ".join(exc.messages)
        if from_panel:
            return _panel(request, found.session, error=said, status=422)
        return HttpResponse(said, status=409 if exc.code == "whispered" else 422)
    if from_panel:
        return _panel(request, found.session)
    return HttpResponse(
        f"Added to the session's library: the roles can search “{found.name}” and cite it "
        "by page once it is read."
    )


@require_POST
def library_document_reread(request, session, document):
    session = session_for(request, session, Need.TALK)
    library_reread(document=_document(session, document))
    return _panel(request, session)


@require_POST
def library_document_remove(request, session, document):
    session = session_for(request, session, Need.TALK)
    library_remove(document=_document(session, document))
    return _panel(request, session)


@require_GET
def library_passage(request, session, document, seq: int):
    """One passage of a document, where it is, the quoted words marked (`?quote=`): the page
    a citation's link opens (the dialog shows its part)."""
    session = session_for(request, session, Need.READ)
    chunk = (
        Chunk.objects.filter(document__session=session, document__public_id=document, seq=seq)
        .select_related("document")
        .first()
    )
    if chunk is None:
        raise Http404("No such passage in this library.")
    # The passage as the role read it: with its neighbours where it is short; the quoted words
    # marked, or, without a quotation, the cited part among its neighbours.
    parts = passages_of([chunk])[chunk.pk]
    text = passage_text(parts)
    before, marked, after = _marked(text, request.GET.get("quote", "")[:800])
    if not marked and len(parts) > 1:
        at = text.index(chunk.text)
        before, marked, after = text[:at], chunk.text, text[at + len(chunk.text) :]
    context = {"session": session, "chunk": chunk, "before": before, "marked": marked,
               "after": after}  # fmt: skip
    template = "chat/_passage.html" if request.htmx else "chat/passage.html"
    return render(request, template, context)


def _marked(text: str, quote: str) -> tuple[str, str, str]:
    """The passage split around the quoted words, when they are in it (case, spacing and a
    PDF's typographic quotes and dashes aside)."""
    words = quote.split()
    if not words:
        return text, "", ""
    pattern = r"\s+".join("".join(LOOSE.get(c, re.escape(c)) for c in word) for word in words)
    found = re.search(pattern, text, re.IGNORECASE)
    if found is None:
        return text, "", ""
    return text[: found.start()], found.group(0), text[found.end() :]


@require_GET
def library_page_picture(request, session, document, page: int):
    """A PDF document's page, drawn (beside a cited passage), for whoever reads the session."""
    session = session_for(request, session, Need.READ)
    found = _document(session, document)
    try:
        with default_storage.open(stored_name(found), "rb") as stored:
            data = stored.read()
    except OSError:
        raise Http404("The document's file is gone.") from None
    picture = bounded.pdf_page(data, page) if data[:5] == b"%PDF-" else None
    if picture is None:
        raise Http404("No such page to draw.")
    response = HttpResponse(picture, content_type="image/png")
    response["Cache-Control"] = "private, max-age=3600"
    return response
