"""Thin views for attachments: upload into a composer (or pick from the session's files), take
one out again, save a sent one into the session's files, and serve one to whoever may see it
(the room's rules; a whisper's attachment only to its audience)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, TooManyFilesSent, ValidationError
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from apps.chat.access import Need, reach
from apps.chat.display.files import attachment_response
from apps.chat.records.attachments import (
    MAX_FILES_AT_ONCE,
    attachment_add,
    attachment_discard,
    attachment_from_workspace,
    attachment_to_workspace,
)
from apps.chat.selectors import attachments_for_user
from apps.chat.web.lookup import thread_for


def attachment_for(request, public_id, need: Need):
    return reach(attachments_for_user, user=request.user, need=need, public_id=public_id)


@require_POST
def attachments_upload(request, thread):
    """Each uploaded file sniffed and kept, answered by its chip for the composer; a file that
    is refused is said in a sentence (the others are kept, the message box is untouched)."""
    thread = thread_for(request, thread, Need.TALK)
    try:
        uploads = request.FILES.getlist("files")
    except TooManyFilesSent:  # Django stops reading past its own limit
        uploads = [None] * (MAX_FILES_AT_ONCE + 1)
    if not uploads or len(uploads) > MAX_FILES_AT_ONCE:
        sentence = (
            f"Attach at most {MAX_FILES_AT_ONCE} files at once." if uploads
            else "Choose a file to attach."
        )  # fmt: skip
        context = {"attachments": [], "refused": [sentence]}
        return render(request, "chat/_attachment_chips.html", context, status=422)
    kept, refused = [], []
    for upload in uploads:
        try:
            added = attachment_add(
                session=thread.session, owner=request.user, thread=thread,
                name=upload.name or "", data=upload.read(),
            )  # fmt: skip
            kept.append(added)
        except ValidationError as exc:
            refused.append(" ".join(exc.messages))
    context = {"attachments": kept, "refused": refused}
    return render(request, "chat/_attachment_chips.html", context, status=422 if refused else 200)


@require_POST
def attachments_from_files(request, thread):
    """A file of the session's workspace attached to the message being written: its chip."""
    thread = thread_for(request, thread, Need.TALK)
    try:
        added = attachment_from_workspace(
            session=thread.session, owner=request.user, thread=thread,
            path=request.POST.get("path", ""),
        )  # fmt: skip
    except ValidationError as exc:
        context = {"attachments": [], "refused": [" ".join(exc.messages)]}
        return render(request, "chat/_attachment_chips.html", context, status=422)
    return render(request, "chat/_attachment_chips.html", {"attachments": [added]})


@require_POST
def attachment_save(request, attachment):
    """A copy of a sent attachment in the session's files (for the roles' file tools)."""
    found = attachment_for(request, attachment, Need.TALK)
    everyone = request.POST.get("everyone") == "1"
    try:
        path = attachment_to_workspace(attachment=found, for_everyone=everyone)
    except ValidationError as exc:
        # 409 for a whisper's file: the page asks the person before saving it for everyone.
        status = 409 if exc.code == "whispered" else 422
        return HttpResponse(" ".join(exc.messages), status=status)
    return HttpResponse(
        f"Saved in the session's files as {path}: everyone in the room and every role can "
        "read it there."
    )


@require_POST
def attachment_remove(request, attachment):
    found = attachment_for(request, attachment, Need.TALK)
    if found.owner_id != request.user.pk:
        raise PermissionDenied("Only the person who attached it can take it out.")
    try:
        attachment_discard(attachment=found)
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=422)
    return HttpResponse("")


@require_GET
def attachment_file(request, attachment):
    return attachment_response(attachment_for(request, attachment, Need.READ))


@require_GET
def attachment_preview(request, attachment):
    """A PDF's first page as a picture (for the bubble and the lightbox)."""
    return attachment_response(attachment_for(request, attachment, Need.READ), preview=True)
