"""Imports through the API (what `parley import FILE` uses): send an export, read its preview,
start it with each voice's role, follow its progress, cancel it."""

from __future__ import annotations

from uuid import UUID

from django.core.exceptions import ValidationError
from ninja import File, Router, Status
from ninja.files import UploadedFile

from apps.api.auth import require_post_scope
from apps.api.schemas import ERRORS, Error, ImportOut, ImportStartIn, Refused, UploadIn
from apps.imports import services
from apps.imports.models import ImportJob
from apps.imports.services import PIECE_BYTES
from apps.imports.sources.reading import sources_sentence

router = Router()


def import_out(job: ImportJob) -> ImportOut:
    return ImportOut(
        id=job.public_id, name=job.name, size=job.size, received=job.received,
        status=job.status, done=job.done, total=job.total,
        preview=job.preview, roles=job.roles, report=job.report, error=job.error,
        created_at=job.created_at, finished_at=job.finished_at,
    )  # fmt: skip


def _job(request, import_id: UUID) -> ImportJob:
    job = ImportJob.objects.filter(public_id=import_id, owner=request.user).first()
    if job is None:
        raise Refused(404, "No such import.", "import_id")
    return job


@router.post(
    "/imports",
    response={202: ImportOut, **ERRORS, 422: Error},
    summary="Send an export",
    description=f"A {sources_sentence()} export (`.zip` or `.json`) as the multipart `file`. "
    "It is read in the background: poll the import until its status is `ready`, read its "
    "`preview`, then start it.",
)
def create_import(request, file: UploadedFile = File(...)):  # noqa: B008
    require_post_scope(request)
    try:
        job = services.job_create(owner=request.user, name=file.name or "export", upload=file)
    except ValidationError as exc:
        raise Refused(422, " ".join(exc.messages), "file") from None
    return Status(202, import_out(job))


@router.post(
    "/imports/uploads",
    response={201: ImportOut, **ERRORS, 422: Error},
    summary="Begin sending an export in pieces",
)
def begin_upload(request, body: UploadIn):
    """For a big file: say its name and size, then send it with `POST /imports/{id}/pieces`,
    each piece at most 8 MB, in order. (A single multipart `POST /imports` holds the whole file
    in the server's memory while it arrives.)"""
    require_post_scope(request)
    try:
        job = services.upload_begin(owner=request.user, name=body.name, size=body.size)
    except ValidationError as exc:
        raise Refused(422, " ".join(exc.messages), "size") from None
    return Status(201, import_out(job))


@router.post(
    "/imports/{import_id}/pieces",
    response={200: ImportOut, **ERRORS, 422: Error},
    summary="Send the next piece of an export",
    openapi_extra={
        "parameters": [
            {
                "in": "query",
                "name": "offset",
                "required": True,
                "schema": {"type": "integer", "minimum": 0},
            }
        ],
        "requestBody": {
            "required": True,
            "content": {
                "application/octet-stream": {
                    "schema": {
                        "type": "string",
                        "format": "binary",
                        "minLength": 1,
                        "maxLength": PIECE_BYTES,
                    }
                }
            },
        },
    },
)
def send_piece(request, import_id: UUID):
    """The bytes from `offset` (the `received` so far) as the raw body, at most 8 MB. A piece
    that is not the next one is a 409: resume from the import's `received`. The last piece
    starts reading the file for its preview."""
    require_post_scope(request)
    job = _job(request, import_id)
    try:
        offset = int(request.GET.get("offset", ""))
    except ValueError:
        raise Refused(400, "Say where the piece starts: ?offset=…", "offset") from None
    try:
        job = services.upload_piece(job=job, offset=offset, stream=request)
    except ValidationError as exc:
        status = services.PIECE_REFUSALS.get(exc.code or "", 422)
        raise Refused(status, " ".join(exc.messages), "offset") from None
    return import_out(job)


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
