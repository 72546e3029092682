"""Reads of saved credentials, scoped to their owner."""

from django.db.models import QuerySet

from apps.providers.models import Credential


def credentials_for_user(*, user) -> QuerySet[Credential]:
    if not user.is_authenticated:
        return Credential.objects.none()
    return Credential.objects.filter(owner=user)
