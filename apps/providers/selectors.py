"""Reads of saved credentials (scoped to their owner) and of what models read."""

from django.db.models import QuerySet

from apps.providers.description import Reads
from apps.providers.models import Credential, ModelReads
from apps.providers.registry import describe


def credentials_for_user(*, user) -> QuerySet[Credential]:
    if not user.is_authenticated:
        return Credential.objects.none()
    return Credential.objects.filter(owner=user)


def model_reads(*, provider: str, model: str) -> Reads:
    """What `model` of `provider` reads besides text: the admin's setting for it (the longest
    matching name) when there is one, else the provider's description."""
    overrides = ModelReads.objects.filter(provider=provider).values_list("model", "images", "pdfs")
    matches = [row for row in overrides if model.startswith(row[0])]
    if matches:
        _, images, pdfs = max(matches, key=lambda row: len(row[0]))
        return Reads(images=images, pdfs=pdfs)
    return describe(provider).reads_for(model)
