"""An import's life: the file kept, read for the preview, imported as the person chose, with
its progress counted as it goes and a cancel honoured between two conversations."""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from apps.chat.models import USER_SPEAKER
from apps.chat.records.attachments import files_kept_on_commit
from apps.chat.records.imported import ImportedMessage, ImportedThread, session_import
from apps.chat.records.text import storable
from apps.imports import sandbox, staging
from apps.imports.layout import Layout
from apps.imports.models import (
    RUNNING,
    ImportedConversation,
    ImportJob,
    ImportStatus,
    import_storage,
)
from apps.imports.sources.common import SourceConversation
from apps.imports.sources.reading import LABELS, UnreadableFile
from apps.ops.storage import delete_unused
from apps.roles.models import Role
from apps.roles.selectors import roles_offered
from apps.roles.services import role_for_imported_voice

logger = logging.getLogger(__name__)

NEW_ROLE = "new"
ABANDONED_AFTER = timedelta(days=1)
PIECE_BYTES = 8 * 1024 * 1024
# Why a piece was refused, as an HTTP status: not the next piece, or past the file's end (409:
# the sender resumes from `received`), too big (413), empty (400); anything else is a 422.
PIECE_REFUSALS = {"offset": 409, "past_the_end": 409, "too_big": 413, "empty": 400}
PROGRESS_SECONDS = 0.5  # how often an import's progress is saved for its page
REPORTED = 200  # sessions (and problems) named in a report; the rest are counted
PREVIEW_TASK = "apps.imports.tasks.preview_import"
RUN_TASK = "apps.imports.tasks.run_import"


def job_create(*, owner, name: str, upload) -> ImportJob:
    """Keep the uploaded file and read it for the preview (in a worker: a big export takes a
    while). `upload` is a Django File; it is copied to storage in chunks, never read whole."""
    size = upload.size or 0
    _check_size(size)
    _discard_abandoned(owner)
    stored = import_storage().save(_stored_name(name), upload)
    job = ImportJob.objects.create(
        owner=owner, name=_clean_name(name), size=size, received=size, file=stored
    )
    _send(PREVIEW_TASK, job)
    return job


def upload_begin(*, owner, name: str, size: int) -> ImportJob:
    """An import whose file will arrive in pieces (`upload_piece`), so no request holds more
    than a piece of it: the web server hands a request's body to Django whole."""
    _check_size(size)
    _discard_abandoned(owner)
    stored = staging.begin(_stored_name(name))
    return ImportJob.objects.create(
        owner=owner, name=_clean_name(name), size=size, file=stored,
        status=ImportStatus.UPLOADING,
    )  # fmt: skip


def upload_piece(*, job: ImportJob, offset: int, stream) -> ImportJob:
    """Append the piece that starts at `offset` (the bytes received so far: a piece sent twice
    or out of order is refused, and the sender resumes from `received`). The last piece
    starts the reading for the preview."""
    with transaction.atomic():
        job = ImportJob.objects.select_for_update().get(pk=job.pk)
        if job.status != ImportStatus.UPLOADING:
            raise ValidationError(f"This import is {job.get_status_display().lower()}.")
        if offset != job.received:
            raise ValidationError(
                f"The next piece starts at byte {job.received:,}, not {offset:,}.", code="offset"
            )
        left = job.size - offset
        written = staging.append(
            job.file.name or "", offset, lambda out: _copy(stream, out, left=left)
        )
        if not written:
            raise ValidationError("A piece holds at least one byte of the file.", code="empty")
        job.received = offset + written
        if job.received == job.size:
            job.status = ImportStatus.READING
            _send(PREVIEW_TASK, job)
        job.save(update_fields=["received", "status"])
    return job


def _copy(stream, out, *, left: int) -> int:
    written = 0
    while chunk := stream.read(64 * 1024):
        written += len(chunk)
        if written > PIECE_BYTES:
            raise ValidationError(
                f"A piece is at most {PIECE_BYTES // 1_048_576} MB.", code="too_big"
            )
        if written > left:
            raise ValidationError(
                f"The file ends {left:,} bytes after this piece's start.", code="past_the_end"
            )
        out.write(chunk)
    return written


def _check_size(size: int) -> None:
    if size <= 0:
        raise ValidationError("That file is empty.")
    limit = settings.PARLEY_IMPORT_MAX_BYTES
    if size > limit:
        raise ValidationError(
            f"That file is {size / 1_048_576:,.0f} MB; imports are at most "
            f"{limit / 1_048_576:,.0f} MB."
        )


def _clean_name(name: str) -> str:
    """The file's name as a person sent it, on one line, storable (a NUL or a lone surrogate
    is no name PostgreSQL keeps)."""
    return " ".join(storable(name or "").split())[:255] or "export"


IMPORTS_FOLDER = "imports/"


def _stored_name(name: str) -> str:
    suffix = ".zip" if name.lower().endswith(".zip") else ".json"
    return f"{IMPORTS_FOLDER}{uuid.uuid4().hex}{suffix}"


def _discard_abandoned(owner) -> None:
    """Uploads and previews left for a day give their file back (a person's next upload does
    it: no sweep needed)."""
    stale = ImportJob.objects.filter(
        owner=owner, status__in=(ImportStatus.UPLOADING, ImportStatus.READY),
        created_at__lt=timezone.now() - ABANDONED_AFTER,
    )  # fmt: skip
    for job in stale:
        _finish(job, ImportStatus.CANCELLED, error="Not started within a day: discarded.")


def job_take(job_pk: int, status: str) -> ImportJob | None:
    """The job a task was sent for, counted as taken; None when it is no longer `status`. A
    job taken before (its task redelivered: the worker that had it died) is failed, not run
    again: a file that took a worker down must not take the next one."""
    with transaction.atomic():
        job = ImportJob.objects.select_for_update().filter(pk=job_pk, status=status).first()
        if job is None:
            return None
        job.attempts += 1
        job.heartbeat_at = timezone.now()
        job.save(update_fields=["attempts", "heartbeat_at"])
    if job.attempts > 1:
        _finish(job, ImportStatus.FAILED, error=WORKER_DIED)
        return None
    return job


WORKER_DIED = (
    "The worker handling this file stopped before it finished, so it was not tried again. "
    "What was imported stays; send the file again to pick up the rest."
)


def job_preview(job: ImportJob) -> None:
    """Read the file and keep what importing it would make (the worker's side of job_create).
    Whatever happens, the job ends: ready, or failed with a sentence."""
    try:
        _preview(job)
    except Exception:
        logger.exception("Reading import %s failed", job.pk)
        _finish(job, ImportStatus.FAILED, error=UNEXPECTED)


UNEXPECTED = "Parley could not read this file (an error on our side, logged for the admins)."


def _preview(job: ImportJob) -> None:
    imported = set(
        ImportedConversation.objects.filter(owner=job.owner).values_list("key", flat=True)
    )

    def progress(position: int) -> None:
        ImportJob.objects.filter(pk=job.pk).update(done=position, heartbeat_at=timezone.now())

    try:
        with staging.local_file(job.file.name or "") as path:
            preview = sandbox.preview(
                path, imported=imported, progress=progress, should_stop=_stopper(job)
            )
    except sandbox.Stopped:
        _finish(job, ImportStatus.CANCELLED)
        return
    except UnreadableFile as exc:
        _finish(job, ImportStatus.FAILED, error=str(exc))
        return
    if not preview["conversations"] and not preview["already"]:
        broken = preview["broken"]
        error = (
            f"No conversation in it can be read: conversation {broken[0]['position']:,} "
            f"{broken[0]['reason']}."
            if broken
            else "The file holds no conversations."
        )
        ImportJob.objects.filter(pk=job.pk).update(preview=preview)
        _finish(job, ImportStatus.FAILED, error=error)
        return
    suggested = {
        voice["name"]: _suggested_role(job.owner, voice["name"]) for voice in preview["voices"]
    }
    ImportJob.objects.filter(pk=job.pk, status=ImportStatus.READING).update(
        status=ImportStatus.READY, preview=preview, roles=suggested, done=0,
        total=preview["conversations"],
    )  # fmt: skip


def _stopper(job: ImportJob):
    """Asked while the reader works (about once a second): whether the job was cancelled or
    ended meanwhile; each ask is also the job's heartbeat."""

    def should_stop() -> bool:
        ImportJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now())
        row = ImportJob.objects.filter(pk=job.pk).values("status", "cancel_requested").first()
        return row is None or row["cancel_requested"] or row["status"] not in RUNNING

    return should_stop


def _suggested_role(owner, voice: str) -> str:
    existing = Role.objects.filter(owner_id=owner.pk, card__imported_voice=voice).first()
    return existing.handle if existing else NEW_ROLE


def job_start(*, job: ImportJob, roles: dict[str, str]) -> ImportJob:
    """Import the previewed file, each voice's replies going to the role chosen for it: an
    existing role the person may use, or NEW_ROLE (a role of theirs named after the voice)."""
    if job.status != ImportStatus.READY:
        raise ValidationError(f"This import is {job.get_status_display().lower()}, not ready.")
    if not job.preview.get("conversations"):
        already, broken = job.preview.get("already", 0), len(job.preview.get("broken", []))
        if already and broken:
            raise ValidationError(
                f"Nothing new to import: {already:,} of its conversations are here already and "
                f"{broken:,} cannot be read (see the conversations listed)."
            )
        if already:
            raise ValidationError(
                "Nothing new to import: every conversation in it is here already."
            )
        raise ValidationError("Nothing in it can be imported: see the conversations listed.")
    offered = set(roles_offered(job.owner).values_list("handle", flat=True))
    chosen = {}
    for voice in (v["name"] for v in job.preview.get("voices", [])):
        pick = roles.get(voice) or job.roles.get(voice) or NEW_ROLE
        if pick != NEW_ROLE and pick not in offered:
            raise ValidationError(f"There is no role @{pick} for the replies of {voice}.")
        chosen[voice] = pick
    updated = ImportJob.objects.filter(pk=job.pk, status=ImportStatus.READY).update(
        status=ImportStatus.IMPORTING, roles=chosen, done=0, attempts=0
    )
    if not updated:
        raise ValidationError("This import has already started.")
    job.refresh_from_db()
    _send(RUN_TASK, job)
    return job


def job_cancel(*, job: ImportJob) -> ImportJob:
    """Stop an import in any state: at once before it starts or while its file arrives or is
    read, else after the conversation being written (what was imported stays; importing the
    file again picks up where it stopped)."""
    if job.status == ImportStatus.IMPORTING:
        ImportJob.objects.filter(pk=job.pk).update(cancel_requested=True)
    elif job.status in (ImportStatus.UPLOADING, ImportStatus.READING, ImportStatus.READY):
        _finish(job, ImportStatus.CANCELLED)
    job.refresh_from_db()
    return job


def jobs_sweep() -> int:
    """End the jobs whose worker died while it had them (no heartbeat for STALE_AFTER): a
    worker's sweep runs it. How many were ended."""
    stale = ImportJob.objects.filter(
        status__in=(ImportStatus.READING, ImportStatus.IMPORTING),
        heartbeat_at__lt=timezone.now() - STALE_AFTER,
    )  # fmt: skip
    ended = 0
    for job in stale:
        ended += _finish(job, ImportStatus.FAILED, error=WORKER_DIED, only_if=job.status)
    return ended


STALE_AFTER = timedelta(minutes=5)  # a heartbeat comes every second or so; one conversation
# of 100,000 messages may take a minute to write


def uploads_expire() -> int:
    """End the uploads left waiting (never finished, or read and never imported) for longer
    than PARLEY_IMPORT_UPLOAD_HOURS, with their files; how many were ended."""
    hours = settings.PARLEY_IMPORT_UPLOAD_HOURS
    waiting = ImportJob.objects.filter(
        status__in=(ImportStatus.UPLOADING, ImportStatus.READY),
        created_at__lt=timezone.now() - timedelta(hours=hours),
    )  # fmt: skip
    error = (
        f"The upload waited {hours} hours without being imported and was deleted; send it again."
    )
    return sum(
        _finish(job, ImportStatus.FAILED, error=error, only_if=job.status) for job in waiting
    )


def import_files_sweep() -> int:
    """Delete the uploads no job names (a job ended while its file could not be deleted)."""
    named = set(ImportJob.objects.exclude(file="").values_list("file", flat=True))
    return delete_unused(IMPORTS_FOLDER, staging.named_by(named), storage=import_storage())


def job_run(job: ImportJob) -> None:
    """Write each conversation not imported before as a session (the worker's side of
    job_start); a broken one is reported and the next one written. Whatever happens, the job
    ends."""
    # `made` counts the sessions; `sessions` names the first REPORTED of them (a report is
    # saved with the progress: it must not grow with a 7,000-conversation export).
    report: dict[str, Any] = {"made": 0, "sessions": [], "already": 0, "broken": [],
                              "problems": []}  # fmt: skip
    try:
        _run(job, report)
    except sandbox.Stopped:
        _finish(job, ImportStatus.CANCELLED, report=report)
    except UnreadableFile as exc:
        _finish(job, ImportStatus.DONE, report=report, error=str(exc))
    except Exception:
        logger.exception("Import %s failed", job.pk)
        _finish(job, ImportStatus.FAILED, report=report, error=UNEXPECTED)
    else:
        _finish(job, ImportStatus.DONE, report=report)


def _run(job: ImportJob, report: dict[str, Any]) -> None:
    roles: dict[str, Role] = {}
    saved = asked = time.monotonic()
    should_stop = _stopper(job)
    with (
        staging.local_file(job.file.name or "") as path,
        sandbox.conversations(path, should_stop=should_stop) as read,
    ):
        for found in read:
            entry = found.entry
            # A cancel is looked for before the first conversation, then twice a second
            # (asking before each of thousands of conversations cost a query each).
            now = time.monotonic()
            if entry.position == 1 or now - asked >= PROGRESS_SECONDS:
                asked = now
                if should_stop():
                    raise sandbox.Stopped
            if entry.conversation is None or found.planned is None:
                _broken(report, entry.position, entry.title, entry.broken)
                continue
            if not entry.conversation.messages:
                report["empty"] = report.get("empty", 0) + 1  # said in the preview: skipped
                continue
            try:
                _import_one(job, entry.conversation, found.planned, entry.format, roles, report)
            except (DatabaseError, ValidationError, ValueError) as exc:
                # One conversation the database refuses is reported; the rest import.
                logger.warning("Import %s: conversation %s not written (%r)", job.pk,
                               entry.position, exc)  # fmt: skip
                _broken(report, entry.position, entry.title,
                        "it could not be written (Parley kept nothing of it)")  # fmt: skip
            if time.monotonic() - saved >= PROGRESS_SECONDS:  # the bar moves; the row stays small
                done = report["made"] + report["already"]
                ImportJob.objects.filter(pk=job.pk).update(
                    done=done, report=report, heartbeat_at=timezone.now()
                )
                saved = time.monotonic()


def _broken(report: dict[str, Any], position: int, title: str, reason: str) -> None:
    if len(report["broken"]) < REPORTED:
        report["broken"].append({"position": position, "title": title, "reason": reason})


def _import_one(
    job: ImportJob, found: SourceConversation, planned: Layout, source: str,
    roles: dict[str, Role], report: dict[str, Any],
) -> None:  # fmt: skip
    if ImportedConversation.objects.filter(owner=job.owner, key=found.key).exists():
        report["already"] += 1
        return
    for voice in found.voices:
        if voice not in roles:
            roles[voice] = _role_for(job, voice, source)
    threads = [
        ImportedThread(
            messages=[
                ImportedMessage(
                    speaker=USER_SPEAKER if m.speaker == "user" else roles[m.speaks_as].handle,
                    text=m.text,
                    created_at=m.created_at,
                    model=m.model,
                    files=[(f.name, f.data) for f in m.files] if m.speaker == "user" else [],
                    interrupted=m.interrupted,
                )
                for m in plan.messages
            ],
            parent=plan.parent,
            fork_at=plan.fork_at,
        )
        for plan in planned.threads
    ]
    used = list({roles[v].pk: roles[v] for v in found.voices}.values())
    try:
        # The rows and the files' bytes together: a rollback takes back the bytes stored.
        with files_kept_on_commit(), transaction.atomic():
            written = session_import(
                owner=job.owner, name=found.title, roles=used or None, threads=threads,
                created_at=found.created_at, updated_at=found.updated_at,
            )  # fmt: skip
            ImportedConversation.objects.create(
                owner=job.owner, key=found.key, session=written.session, job=job
            )
    except IntegrityError:  # the same conversation, imported at this moment by another job
        report["already"] += 1
        return
    report["made"] += 1
    if len(report["sessions"]) < REPORTED:
        report["sessions"].append({"id": str(written.session.public_id),
                                   "name": written.session.name,
                                   "messages": written.messages})  # fmt: skip
    problems = report["problems"]
    problems.extend(f"{found.title}: {p}" for p in written.problems[: REPORTED - len(problems)])


def _role_for(job: ImportJob, voice: str, source: str) -> Role:
    pick = job.roles.get(voice, NEW_ROLE)
    if pick != NEW_ROLE:
        role = roles_offered(job.owner).filter(handle=pick).first()
        if role is not None:
            return role
    return role_for_imported_voice(owner=job.owner, voice=voice, source=LABELS.get(source, source))


def _finish(
    job: ImportJob, status: str, *, report: dict | None = None, error: str = "",
    only_if: str | None = None,
) -> int:  # fmt: skip
    """End the job (unless it has ended already, or is no longer `only_if`) and delete its
    file; 1 when this call ended it."""
    fields: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "error": error}
    if report is not None:
        fields["report"] = report
        fields["done"] = report["made"] + report["already"]
    rows = ImportJob.objects.filter(pk=job.pk, finished_at__isnull=True)
    if only_if is not None:
        rows = rows.filter(status=only_if)
    ended = rows.update(**fields, file="")
    if ended and job.file.name:
        staging.discard(job.file.name)
    return ended


def _send(task: str, job: ImportJob) -> None:
    def send() -> None:
        try:
            current_app.send_task(task, args=[job.pk])
        except (OperationalError, RedisError, OSError) as exc:
            logger.warning("Could not hand import %s to the workers (%s)", job.pk, exc)
            _finish(job, ImportStatus.FAILED, error="The workers could not be reached; try again.")

    transaction.on_commit(send)
