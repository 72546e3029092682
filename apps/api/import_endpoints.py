"""Imports through the API (what `parley import FILE` uses): send an export, read its preview,
start it with each voice's role, follow its progress, cancel it."""

from __future__ import annotations

from uuid import UUID

from django.core.exceptions import ValidationError
from ninja import File, Router, Status
from ninja.files import UploadedFile

from apps.api.auth import require_post_scope
from apps.api.schemas import ERRORS, Error, ImportOut, ImportStartIn, Refused
from apps.imports import services
from apps.imports.models import ImportJob

router = Router()


def import_out(job: ImportJob) -> ImportOut:
    return ImportOut(
        id=job.public_id, name=job.name, status=job.status, done=job.done, total=job.total,
        preview=job.preview, roles=job.roles, report=job.report, error=job.error,
        created_at=job.created_at, finished_at=job.finished_at,
    )  # fmt: skip


def _job(request, import_id: UUID) -> ImportJob:
    job = ImportJob.objects.filter(public_id=import_id, owner=request.user).first()
    if job is None:
        raise Refused(404, "No such import.", "import_id")
    return job


@router.post("/imports", response={202: ImportOut, **ERRORS, 422: Error}, summary="Send an export")
def create_import(request, file: UploadedFile = File(...)):  # noqa: B008
    """A ChatGPT, Claude, Open WebUI, LibreChat or Parley export (`.zip` or `.json`) as the
    multipart `file`. It is read in the background: poll the import until its status is
    `ready`, read its `preview`, then start it."""
    require_post_scope(request)
    try:
        job = services.job_create(owner=request.user, name=file.name or "export", upload=file)
    except ValidationError as exc:
        raise Refused(422, " ".join(exc.messages), "file") from None
    return Status(202, import_out(job))


@router.get("/imports", response={200: list[ImportOut], **ERRORS}, summary="Your imports")
def list_imports(request):
    return [import_out(job) for job in ImportJob.objects.filter(owner=request.user)[:50]]


@router.get("/imports/{import_id}", response={200: ImportOut, **ERRORS}, summary="An import")
def get_import(request, import_id: UUID):
    return import_out(_job(request, import_id))


@router.post(
    "/imports/{import_id}/start",
    response={202: ImportOut, **ERRORS, 422: Error},
    summary="Import what the preview lists",
)
def start_import(request, import_id: UUID, body: ImportStartIn):
    require_post_scope(request)
    try:
        job = services.job_start(job=_job(request, import_id), roles=body.roles)
    except ValidationError as exc:
        raise Refused(409, " ".join(exc.messages), "roles") from None
    return Status(202, import_out(job))


@router.post(
    "/imports/{import_id}/cancel", response={200: ImportOut, **ERRORS}, summary="Cancel an import"
)
def cancel_import(request, import_id: UUID):
    """Before it starts: at once. While it imports: after the conversation being written;
    what was imported stays, and importing the file again goes on from there."""
    require_post_scope(request)
    return import_out(services.job_cancel(job=_job(request, import_id)))
