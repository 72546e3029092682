import uuid

from django.conf import settings
from django.db import models

from apps.providers import crypto
from apps.providers.description import Reads
from apps.providers.registry import describe, provider_choices
from apps.providers.types import Auth


class AuthStyle(models.TextChoices):
    API_KEY = "api_key", "API key"
    BEARER = "bearer", "Bearer token (a gateway in front of the provider)"
    HEADER = "header", "Custom header (a gateway's own header)"


class Credential(models.Model):
    """A user's saved credential for one provider; the key is stored only encrypted."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="credentials"
    )
    name = models.CharField(max_length=80)
    provider = models.CharField(max_length=32, choices=provider_choices)
    base_url = models.URLField(
        blank=True, help_text="Needed for OpenAI-compatible servers; the endpoint for Azure."
    )
    auth_style = models.CharField(
        "sent as", max_length=16, choices=AuthStyle.choices, default=AuthStyle.API_KEY
    )
    auth_header = models.CharField(
        "header name", max_length=80, blank=True, help_text="For a custom header."
    )
    # The provider's own settings besides the key (its description's `settings`): an Azure
    # deployment and API version, OpenRouter's app URL and name. Not secret.
    options = models.JSONField(default=dict, blank=True)
    api_key_encrypted = models.TextField(blank=True, editable=False)
    key_last4 = models.CharField(max_length=4, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="unique_credential_name")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_provider_display()}, {self.masked_key})"

    @property
    def masked_key(self) -> str:
        return crypto.mask(self.key_last4)

    def auth(self) -> Auth:
        """How the key is presented (not secret)."""
        return Auth(
            style=self.auth_style,  # type: ignore[arg-type]
            header=self.auth_header,
            deployment=self.options.get("azure_deployment", ""),
            api_version=self.options.get("azure_api_version", ""),
            headers=describe(self.provider).headers(self.options),
        )

    def api_key(self) -> str:
        """The plaintext key, for the call path to the SDK only."""
        return crypto.decrypt(self.api_key_encrypted) if self.api_key_encrypted else ""


class ModelPrice(models.Model):
    """A model's list price in US dollars per million tokens. `model` also prices the models
    whose names start with it ("claude-sonnet-5" covers "claude-sonnet-5-20260301"); the
    longest match wins."""

    provider = models.CharField(max_length=32, choices=provider_choices)
    model = models.CharField(max_length=120)
    input_per_mtok = models.DecimalField("input $/MTok", max_digits=10, decimal_places=4)
    output_per_mtok = models.DecimalField("output $/MTok", max_digits=10, decimal_places=4)
    cache_read_per_mtok = models.DecimalField(
        "cache read $/MTok", max_digits=10, decimal_places=4, default=0
    )
    cache_write_per_mtok = models.DecimalField(
        "cache write $/MTok", max_digits=10, decimal_places=4, default=0
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider", "model"]
        constraints = [
            models.UniqueConstraint(fields=["provider", "model"], name="one_price_per_model")
        ]

    def __str__(self) -> str:
        return f"{self.model} ({self.get_provider_display()})"


class ReadsSource(models.TextChoices):
    LISTED = "listed", "the provider's model list"
    ADMIN = "admin", "set by an admin"


class ModelReads(models.Model):
    """What a model reads besides text. Rows come from the provider's model list where it says
    (Anthropic's capabilities, OpenRouter's modalities), kept fresh each time the list is read,
    or from the admin where the list is silent or wrong (a local vision model, a new release).
    An admin's `model` also covers the models whose names start with it; the longest match
    wins over the list, and the list over the description."""

    provider = models.CharField(max_length=32, choices=provider_choices)
    model = models.CharField(max_length=120)
    images = models.BooleanField(default=False)
    pdfs = models.BooleanField("PDFs", default=False)
    source = models.CharField(max_length=8, choices=ReadsSource, default=ReadsSource.ADMIN)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider", "model"]
        verbose_name = "what a model reads"
        verbose_name_plural = "what models read"
        constraints = [
            models.UniqueConstraint(fields=["provider", "model"], name="one_reads_per_model")
        ]

    def __str__(self) -> str:
        return f"{self.model} ({self.get_provider_display()}): {self.reads().describe()}"

    def reads(self) -> Reads:
        return Reads(images=self.images, pdfs=self.pdfs)
