"""One description per provider kind (issue 34): the form, the checks, the admin and what a
model reads are derived from it."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from apps.providers.description import ProviderDescription, Reads
from apps.providers.models import ModelReads
from apps.providers.registry import DESCRIPTIONS, describe, get_adapter
from apps.providers.selectors import model_reads


def test_every_kind_has_an_adapter_of_its_wire_and_a_unique_kind():
    kinds = [description.kind for description in DESCRIPTIONS]
    assert len(kinds) == len(set(kinds))
    for description in DESCRIPTIONS:
        adapter = get_adapter(description.kind)
        assert adapter.kind == description.kind
        assert adapter.default_model == description.default_model


def test_the_form_shows_each_providers_own_fields_only_when_it_is_chosen(alice):
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("providers:credential_create")).content.decode()
    for description in DESCRIPTIONS:
        assert f'<option value="{description.kind}"' in page
        chosen = f'.credential-form:has(#id_provider option[value="{description.kind}"]:checked)'
        for setting in description.settings:
            assert f'name="{setting.name}"' in page
            assert chosen in page and f".field-{setting.name}" in page
        if description.base_url_hint:
            assert f"hint-{description.kind}" in page
    assert "&quot;" not in page.split("<style>", 1)[1].split("</style>", 1)[0]


def test_an_admin_setting_wins_over_the_description_by_the_longest_name(db):
    assert model_reads(provider="ollama", model="mistral:7b") == Reads()
    ModelReads.objects.create(provider="ollama", model="mistral", images=True)
    ModelReads.objects.create(provider="ollama", model="mistral-small3.1", images=True, pdfs=True)
    assert model_reads(provider="ollama", model="mistral:7b") == Reads(images=True)
    assert model_reads(provider="ollama", model="mistral-small3.1:24b").pdfs
    assert model_reads(provider="anthropic", model="claude-sonnet-5").pdfs  # the description


def test_the_admin_checks_a_credential_against_its_description(admin_client, alice):
    response = admin_client.post(
        reverse("admin:providers_credential_add"),
        {"owner": alice.pk, "name": "Azure", "provider": "azure_openai",
         "base_url": "https://r.example", "auth_style": "api_key", "options": "{}"},
    )  # fmt: skip
    assert response.status_code == 200
    assert "this provider needs it" in response.content.decode()


def test_a_description_that_contradicts_itself_is_refused():
    with pytest.raises(ValueError, match="required base URL"):
        ProviderDescription(kind="x", label="X", wire="openai_compatible",
                            base_url="required", default_base_url="http://x")  # fmt: skip
    assert describe("demo").reads_for("demo-1") == Reads()
