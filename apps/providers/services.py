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
from apps.providers.description import ListedModel, ProviderDescription
from apps.providers.models import AuthStyle, Credential, ModelReads, ReadsSource
from apps.providers.registry import describe, get_adapter
from apps.providers.types import ProviderError

logger = logging.getLogger(__name__)
MODELS_CACHE_SECONDS = 600
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,80}$")  # an HTTP token
HEADERS_NOT_FOR_KEYS = {"host", "content-type", "content-length", "accept", "user-agent"}


def _checked_auth(description: ProviderDescription, style: str, header: str) -> None:
    if style not in description.auth_styles:
        names = ", ".join(AuthStyle(choice).label.split(" (")[0].lower()
                          for choice in description.auth_styles)  # fmt: skip
        raise ValidationError({"auth_style": f"This provider takes: {names}."})
    if style == AuthStyle.HEADER and (
        not HEADER_NAME.match(header) or header.lower() in HEADERS_NOT_FOR_KEYS
    ):
        raise ValidationError(
            {"auth_header": "Give the header's name, e.g. X-Api-Key (letters, digits and -)."}
        )


def _checked_base_url(description: ProviderDescription, base_url: str) -> str:
    if description.base_url == "none":
        return ""
    if not base_url and description.base_url == "required":
        raise ValidationError(
            {"base_url": f"{description.label} needs its base URL. {description.base_url_hint}"}
        )
    return base_url or description.default_base_url


def _checked_settings(description: ProviderDescription, given: dict[str, str]) -> dict[str, str]:
    """The provider's settings from `given` (defaults filled in); others are dropped."""
    options, problems = {}, {}
    for setting in description.settings:
        value = str(given.get(setting.name) or "").strip() or setting.default
        problem = setting.check(value)
        if problem:
            problems[setting.name] = problem
        elif value:
            options[setting.name] = value
    if problems:
        raise ValidationError(problems)
    return options


def credential_checked(
    *, provider: str, base_url: str, auth_style: str, auth_header: str, settings: dict[str, str]
) -> tuple[ProviderDescription, str, str, dict[str, str]]:
    """A credential's provider-specific parts, checked against the provider's description:
    (the description, the base URL to store, the way the key is sent, the settings to store)."""
    try:
        description = describe(provider)
    except LookupError:
        raise ValidationError({"provider": f"Unknown provider {provider!r}."}) from None
    auth_style = auth_style or description.auth_styles[0]
    _checked_auth(description, auth_style, auth_header)
    base_url = _checked_base_url(description, base_url)
    return description, base_url, auth_style, _checked_settings(description, settings)


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
    **settings: str,
) -> Credential:
    """Create or update a credential; `api_key=None` on update keeps the stored key.
    `settings` are the provider's own (its description's), e.g. `azure_deployment`."""
    name, base_url = name.strip(), base_url.strip().rstrip("/")
    auth_header = auth_header.strip()
    api_key = api_key.strip() if api_key is not None else None
    if not name:
        raise ValidationError({"name": "Give the credential a name."})
    description, base_url, auth_style, options = credential_checked(
        provider=provider, base_url=base_url, auth_style=auth_style, auth_header=auth_header,
        settings=settings,
    )  # fmt: skip
    has_key = bool(api_key) or bool(credential and credential.api_key_encrypted and api_key is None)
    if (description.needs_key or auth_style != AuthStyle.API_KEY) and not has_key:
        raise ValidationError({"api_key": "This provider needs an API key."})
    credential = credential or Credential(owner=owner)
    credential.name, credential.provider, credential.base_url = name, provider, base_url
    credential.auth_style = auth_style
    credential.auth_header = auth_header if auth_style == AuthStyle.HEADER else ""
    credential.options = options
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
    names = [model.name for model in models]
    models_reads_listed(provider=credential.provider, models=models)
    cache.set(_models_cache_key(credential), names, MODELS_CACHE_SECONDS)
    return CredentialCheck(True, f"Connected: {len(names)} models available.", names)


def models_reads_listed(*, provider: str, models: list[ListedModel]) -> None:
    """Keep what a provider's model list says its models read (where it says), beside and
    below the admin's settings, which it never changes."""
    said = {model.name: model.reads for model in models if model.reads is not None}
    if not said:
        return
    admin_set = set(
        ModelReads.objects.filter(
            provider=provider, model__in=said, source=ReadsSource.ADMIN
        ).values_list("model", flat=True)
    )
    rows = [
        ModelReads(provider=provider, model=name[:120], images=reads.images, pdfs=reads.pdfs,
                   source=ReadsSource.LISTED)
        for name, reads in said.items()
        if name not in admin_set
    ]  # fmt: skip
    ModelReads.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["provider", "model"],
        update_fields=["images", "pdfs", "updated_at"],
    )


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


def credential_embedder(credential: Credential | None) -> str:
    """`kind:model` of the embeddings a credential's provider gives, or "" when it has none."""
    if credential is None:
        return ""
    model = describe(credential.provider).embedding_model
    return f"{credential.provider}:{model}" if model else ""


def credential_embed(*, credential: Credential, texts: list[str]) -> list[list[float]]:
    """Each text's vector from the credential's provider (its description's embedding model);
    ProviderError, with the key scrubbed from its message, when the call fails."""
    adapter = get_adapter(credential.provider)
    model = describe(credential.provider).embedding_model
    embed = getattr(adapter, "embed", None)
    if not model or embed is None:
        raise ProviderError(f"{adapter.label} gives no embeddings.", retryable=False)
    api_key = credential.api_key()
    try:
        return asyncio.run(
            embed(texts, model=model, api_key=api_key, base_url=credential.base_url,
                  auth=credential.auth())
        )  # fmt: skip
    except ProviderError as exc:
        raise ProviderError(crypto.scrub(str(exc), api_key), status=exc.status) from None
