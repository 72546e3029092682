"""Account menu → Import: send an export, see what it holds, choose who answered, import it
with a live progress bar, cancel it."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.imports import services
from apps.imports.models import ImportJob
from apps.imports.sources.reading import GUIDE
from apps.roles.selectors import roles_offered


@require_http_methods(["GET", "POST"])
def import_list(request):
    error = ""
    if request.method == "POST":
        upload = request.FILES.get("file")
        if upload is None:
            error = "Choose an export file to import."
        else:
            try:
                job = services.job_create(owner=request.user, name=upload.name, upload=upload)
                return redirect("imports:import_detail", job=job.public_id)
            except ValidationError as exc:
                error = " ".join(exc.messages)
    jobs = ImportJob.objects.filter(owner=request.user)[:20]
    return render(
        request,
        "imports/imports.html",
        {"jobs": jobs, "error": error, "guide": GUIDE},
        status=422 if error else 200,
    )


@require_POST
def import_begin(request):
    """The page's script sends a big file in pieces: first its name and size."""
    try:
        size = int(request.POST.get("size", ""))
        job = services.upload_begin(
            owner=request.user, name=request.POST.get("name", ""), size=size
        )
    except ValueError:
        return JsonResponse({"detail": "Say the file's size in bytes."}, status=400)
    except ValidationError as exc:
        return JsonResponse({"detail": " ".join(exc.messages)}, status=422)
    return JsonResponse(_upload_state(job), status=201)


@require_POST
def import_piece(request, job):
    """One piece of the file, as the request's raw body, at `?offset=` (the bytes received so
    far): 409 with `received` when it is not the next one, so the sender resumes there."""
    job = _job(request, job)
    try:
        offset = int(request.GET.get("offset", ""))
        job = services.upload_piece(job=job, offset=offset, stream=request)
    except ValueError:
        return JsonResponse({"detail": "Say where the piece starts: ?offset=…"}, status=400)
    except ValidationError as exc:
        status = services.PIECE_REFUSALS.get(exc.code or "", 422)
        job.refresh_from_db()
        return JsonResponse({"detail": " ".join(exc.messages), **_upload_state(job)}, status=status)
    return JsonResponse(_upload_state(job))


def _upload_state(job: ImportJob) -> dict:
    return {
        "id": str(job.public_id),
        "received": job.received,
        "size": job.size,
        "status": job.status,
        "piece_bytes": services.PIECE_BYTES,
        "piece_url": reverse("imports:import_piece", kwargs={"job": job.public_id}),
        "page": reverse("imports:import_detail", kwargs={"job": job.public_id}),
    }


def _job(request, job) -> ImportJob:
    return get_object_or_404(ImportJob, public_id=job, owner=request.user)


def _context(request, job: ImportJob, error: str = "") -> dict:
    return {
        "job": job,
        "error": error,
        "roles": roles_offered(request.user).order_by("display_name"),
        "voices": [
            {**voice, "field": f"role_{index}", "pick": job.roles.get(voice["name"], "new")}
            for index, voice in enumerate(job.preview.get("voices", []))
        ],
    }


@require_GET
def import_detail(request, job):
    job = _job(request, job)
    return render(request, "imports/job.html", _context(request, job))


@require_GET
def import_progress(request, job):
    """The job's block, polled by its page while the file is read or imported."""
    job = _job(request, job)
    return render(request, "imports/_job.html", _context(request, job))


@require_POST
def import_start(request, job):
    job = _job(request, job)
    voices = job.preview.get("voices", [])
    picks = {
        voice["name"]: request.POST.get(f"role_{index}", services.NEW_ROLE)
        for index, voice in enumerate(voices)
    }
    try:
        job = services.job_start(job=job, roles=picks)
    except ValidationError as exc:
        return render(
            request, "imports/job.html", _context(request, job, " ".join(exc.messages)), status=422
        )
    return redirect("imports:import_detail", job=job.public_id)


@require_POST
def import_cancel(request, job):
    job = services.job_cancel(job=_job(request, job))
    if request.htmx:
        return render(request, "imports/_job.html", _context(request, job))
    return redirect("imports:import_detail", job=job.public_id)
