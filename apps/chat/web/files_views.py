"""Thin views for a session's workspace: the Files panel, upload, download, delete."""

from __future__ import annotations

from django.conf import settings
from django.http import FileResponse, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from apps.attachments.headers import content_disposition
from apps.chat.access import Need
from apps.chat.records.sessions import (
    session_files_write,
    session_storage_used,
    session_workspace,
)
from apps.chat.web import library_views
from apps.chat.web.lookup import session_for
from apps.workspace.files import WorkspaceError

MAX_UPLOAD_FILES = 100  # a dropped folder comes in one request (Django's own limit)


def _panel(request, session, *, error: str = "", status: int = 200):
    workspace = session_workspace(session)
    context = {
        "session": session,
        "files": workspace.files(),
        # The session's one quota: the workspace, the attachments and the library together.
        "used": session_storage_used(session),
        "quota": settings.PARLEY_WORKSPACE_QUOTA_MB * 1024 * 1024,
        "error": error,
        "library_html": library_views.panel_html(request, session),
    }
    return render(request, "chat/_files.html", context, status=status)


@require_GET
def files_panel(request, session):
    session = session_for(request, session, Need.READ)
    return _panel(request, session)


@require_POST
def files_upload(request, session):
    """Save the uploaded files, each under its path when the page sends one (a dropped or
    chosen folder keeps its layout) and inside the folder named in "Into folder"; every path
    is checked inside the workspace. All or nothing per file."""
    session = session_for(request, session, Need.TALK)
    uploads = request.FILES.getlist("files")
    if not uploads:
        return _panel(request, session, error="Choose one or more files to upload.", status=422)
    if len(uploads) > MAX_UPLOAD_FILES:
        error = f"Upload at most {MAX_UPLOAD_FILES} files at once."
        return _panel(request, session, error=error, status=422)
    paths = request.POST.getlist("paths")
    if len(paths) != len(uploads):  # the browser sends bare names (Django keeps only those)
        paths = [upload.name or "" for upload in uploads]
    folder = request.POST.get("folder", "").strip().replace("\\", "/").strip("/")
    problems = []
    for upload, path in zip(uploads, paths, strict=True):
        try:
            session_files_write(
                session=session, path=f"{folder}/{path}" if folder else path, data=upload
            )
        except WorkspaceError as exc:
            problems.append(str(exc))
    status = 422 if problems else 200
    return _panel(request, session, error=" ".join(problems), status=status)


@require_GET
def files_download(request, session):
    session = session_for(request, session, Need.READ)
    workspace, path = session_workspace(session), request.GET.get("path", "")
    try:
        if not workspace.is_file(path):
            return HttpResponse("There is no such file in the workspace.", status=404)
        handle = workspace.open(path)
    except WorkspaceError as exc:
        return HttpResponse(str(exc), status=400)
    response = FileResponse(handle, as_attachment=True)
    response["Content-Disposition"] = content_disposition(path.rpartition("/")[2])
    return response


@require_POST
def files_delete(request, session):
    session = session_for(request, session, Need.TALK)
    try:
        session_workspace(session).delete(request.POST.get("path", ""))
    except WorkspaceError as exc:
        return _panel(request, session, error=str(exc), status=422)
    return _panel(request, session)
