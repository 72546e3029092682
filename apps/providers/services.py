"""Writes and checks for saved credentials. Plaintext keys live only on the call path."""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass

from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from apps.providers import crypto
from apps.providers.adapters.openai import AZURE_API_VERSION
from apps.providers.models import AUTH_STYLES_BY_PROVIDER, AuthStyle, Credential, ProviderKind
from apps.providers.registry import get_adapter
from apps.providers.types import ProviderError

logger = logging.getLogger(__name__)
MODELS_CACHE_SECONDS = 600
NEEDS_KEY = {
    ProviderKind.ANTHROPIC, ProviderKind.OPENAI, ProviderKind.GEMINI, ProviderKind.AZURE_OPENAI
}  # fmt: skip
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,80}$")  # an HTTP token
HEADERS_NOT_FOR_KEYS = {"host", "content-type", "content-length", "accept", "user-agent"}


def _checked_auth(
    provider: str, base_url: str, style: str, header: str, deployment: str, api_version: str
) -> None:
    allowed = AUTH_STYLES_BY_PROVIDER.get(provider, {AuthStyle.API_KEY})  # type: ignore[call-overload]
    if style not in allowed:
        names = ", ".join(AuthStyle(choice).label.split(" (")[0].lower() for choice in allowed)
        raise ValidationError({"auth_style": f"This provider takes: {names}."})
    if style == AuthStyle.HEADER and (
        not HEADER_NAME.match(header) or header.lower() in HEADERS_NOT_FOR_KEYS
    ):
        raise ValidationError(
            {"auth_header": "Give the header's name, e.g. X-Api-Key (letters, digits and -)."}
        )
    if provider == ProviderKind.AZURE_OPENAI:
        if not base_url:
            raise ValidationError(
                {"base_url": "Azure OpenAI needs the resource's endpoint, e.g. "
                             "https://my-resource.openai.azure.com."}
            )  # fmt: skip
        if not deployment:
            raise ValidationError({"azure_deployment": "Name the model deployment to use."})
        if api_version and not re.fullmatch(r"\d{4}-\d{2}-\d{2}(-preview)?", api_version):
            raise ValidationError(
                {"azure_api_version": "An API version looks like 2024-10-21 or 2025-04-01-preview."}
            )


def credential_save(
    *,
    owner,
    name: str,
    provider: str,
    base_url: str = "",
    api_key: str | None = None,
    credential: Credential | None = None,
    auth_style: str = AuthStyle.API_KEY,
    auth_header: str = "",
    azure_deployment: str = "",
    azure_api_version: str = "",
) -> Credential:
    """Create or update a credential; `api_key=None` on update keeps the stored key."""
    name, base_url = name.strip(), base_url.strip().rstrip("/")
    auth_header, azure_deployment = auth_header.strip(), azure_deployment.strip()
    azure_api_version = azure_api_version.strip()
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
    _checked_auth(provider, base_url, auth_style, auth_header, azure_deployment, azure_api_version)
    if provider == ProviderKind.AZURE_OPENAI and not azure_api_version:
        azure_api_version = AZURE_API_VERSION
    has_key = bool(api_key) or bool(credential and credential.api_key_encrypted and api_key is None)
    if (provider in NEEDS_KEY or auth_style != AuthStyle.API_KEY) and not has_key:
        raise ValidationError({"api_key": "This provider needs an API key."})
    credential = credential or Credential(owner=owner)
    credential.name, credential.provider, credential.base_url = name, provider, base_url
    credential.auth_style = auth_style
    credential.auth_header = auth_header if auth_style == AuthStyle.HEADER else ""
    is_azure = provider == ProviderKind.AZURE_OPENAI
    credential.azure_deployment = azure_deployment if is_azure else ""
    credential.azure_api_version = azure_api_version if is_azure else ""
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
        models = asyncio.run(
            adapter.list_models(
                api_key=api_key, base_url=credential.base_url, auth=credential.auth()
            )
        )
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
