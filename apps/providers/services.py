"""Writes and checks for saved credentials. Plaintext keys live only on the call path."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from apps.providers import crypto
from apps.providers.models import Credential, ProviderKind
from apps.providers.registry import get_adapter
from apps.providers.types import ProviderError

logger = logging.getLogger(__name__)
MODELS_CACHE_SECONDS = 600
NEEDS_KEY = {ProviderKind.ANTHROPIC, ProviderKind.OPENAI, ProviderKind.GEMINI}


def credential_save(
    *,
    owner,
    name: str,
    provider: str,
    base_url: str = "",
    api_key: str | None = None,
    credential: Credential | None = None,
) -> Credential:
    """Create or update a credential; `api_key=None` on update keeps the stored key."""
    name, base_url = name.strip(), base_url.strip().rstrip("/")
    api_key = api_key.strip() if api_key is not None else None
    if not name:
        raise ValidationError({"name": "Give the credential a name."})
    if provider not in ProviderKind.values:
        raise ValidationError({"provider": f"Unknown provider {provider!r}."})
    if provider == ProviderKind.OPENAI_COMPATIBLE and not base_url:
        raise ValidationError(
            {"base_url": "An OpenAI-compatible server needs its base URL, e.g. "
                         "http://localhost:11434/v1 for Ollama."}
        )  # fmt: skip
    has_key = bool(api_key) or bool(credential and credential.api_key_encrypted and api_key is None)
    if provider in NEEDS_KEY and not has_key:
        raise ValidationError({"api_key": "This provider needs an API key."})
    credential = credential or Credential(owner=owner)
    credential.name, credential.provider, credential.base_url = name, provider, base_url
    if api_key is not None:
        credential.api_key_encrypted = crypto.encrypt(api_key) if api_key else ""
        credential.key_last4 = api_key[-4:] if api_key else ""
    try:
        with transaction.atomic():
            credential.save()
    except IntegrityError:
        raise ValidationError({"name": "You already have a credential with that name."}) from None
    cache.delete(_models_cache_key(credential))
    return credential


def credential_delete(*, credential: Credential) -> None:
    cache.delete(_models_cache_key(credential))
    credential.delete()


@dataclass(frozen=True)
class CredentialCheck:
    ok: bool
    message: str
    models: list[str]


def credential_test(*, credential: Credential) -> CredentialCheck:
    """A cheap real call (list the models) with a message a person can act on."""
    adapter = get_adapter(credential.provider)
    try:
        api_key = credential.api_key()
    except crypto.SecretUnreadable as exc:
        return CredentialCheck(False, str(exc), [])
    try:
        models = asyncio.run(adapter.list_models(api_key=api_key, base_url=credential.base_url))
    except ProviderError as exc:
        message = crypto.scrub(str(exc), api_key)
        if exc.status in (401, 403):
            message = f"The key was refused ({exc.status}): check that it is correct and active."
        elif exc.status == 404:
            message = "The server answered, but not as this provider: check the base URL."
        logger.info("Credential %s failed its test: %s", credential.public_id, message)
        return CredentialCheck(False, message, [])
    cache.set(_models_cache_key(credential), models, MODELS_CACHE_SECONDS)
    return CredentialCheck(True, f"Connected: {len(models)} models available.", models)


def _models_cache_key(credential: Credential) -> str:
    return f"parley:models:{credential.public_id}"


def credential_models(*, credential: Credential | None) -> list[str]:
    """Model ids for forms: the provider's list (cached), else a curated fallback."""
    if credential is None:
        return list(get_adapter("demo").fallback_models)
    cached = cache.get(_models_cache_key(credential))
    if cached is not None:
        return cached
    check = credential_test(credential=credential)
    return check.models or list(get_adapter(credential.provider).fallback_models)


def credentials_rotate() -> int:
    """Re-encrypt every stored key with the newest encryption key; return how many."""
    count = 0
    for credential in Credential.objects.exclude(api_key_encrypted=""):
        Credential.objects.filter(pk=credential.pk).update(
            api_key_encrypted=crypto.rotate(credential.api_key_encrypted)
        )
        count += 1
    return count
