"""The worker's side of an import: reading the file for its preview, and importing it."""

from __future__ import annotations

from celery import shared_task

from apps.imports import services
from apps.imports.models import ImportStatus


@shared_task(name=services.PREVIEW_TASK, ignore_result=True)
def preview_import(job_pk: int) -> None:
    job = services.job_take(job_pk, ImportStatus.READING)
    if job is not None:
        services.job_preview(job)


@shared_task(name=services.RUN_TASK, ignore_result=True)
def run_import(job_pk: int) -> None:
    job = services.job_take(job_pk, ImportStatus.IMPORTING)
    if job is not None:
        services.job_run(job)
