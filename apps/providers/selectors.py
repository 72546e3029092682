"""Reads of saved credentials (scoped to their owner) and of what models read."""

from collections.abc import Iterable

from django.db.models import QuerySet

from apps.providers.description import Reads
from apps.providers.models import Credential, ModelReads, ReadsSource
from apps.providers.registry import describe


def credentials_for_user(*, user) -> QuerySet[Credential]:
    if not user.is_authenticated:
        return Credential.objects.none()
    return Credential.objects.filter(owner=user)


def model_reads(*, provider: str, model: str) -> Reads:
    """What `model` of `provider` reads besides text: the admin's setting (the longest
    matching name) when there is one, else what the provider's model list said of exactly this
    model, else the provider's description."""
    return models_reads([(provider, model)])[(provider, model)]


def models_reads(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Reads]:
    """`model_reads` of several (provider, model) pairs, in one query."""
    pairs = set(pairs)
    rows = list(
        ModelReads.objects.filter(provider__in={provider for provider, _ in pairs}).values_list(
            "provider", "model", "source", "images", "pdfs"
        )
    )
    return {pair: _reads(*pair, rows) for pair in pairs}


def _reads(provider: str, model: str, rows: list[tuple]) -> Reads:
    rows = [row[1:] for row in rows if row[0] == provider]
    admin = [row for row in rows if row[1] == ReadsSource.ADMIN and model.startswith(row[0])]
    listed = [row for row in rows if row[1] == ReadsSource.LISTED and row[0] == model]
    if admin or listed:
        _, _, images, pdfs = max(admin, key=lambda row: len(row[0])) if admin else listed[0]
        return Reads(images=images, pdfs=pdfs)
    return describe(provider).reads_for(model)
