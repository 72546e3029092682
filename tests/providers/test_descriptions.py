"""One description per provider kind (issue 34): the form, the checks, the admin and what a
model reads are derived from it."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from apps.providers.description import ProviderDescription, Reads
from apps.providers.models import ModelReads, ReadsSource
from apps.providers.registry import DESCRIPTIONS, describe, get_adapter
from apps.providers.selectors import model_reads
from apps.providers.services import credential_save, credential_test
from tests.providers.test_credential_types import KEY


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


def test_what_the_model_list_says_wins_over_the_description(alice, emulator):
    emulator.input_modalities["claude-haiku-4-5"] = ["text", "image"]  # no PDFs, it says
    credential = credential_save(
        owner=alice, name="Listed", provider="anthropic", base_url=emulator.url, api_key=KEY
    )
    assert describe("anthropic").reads_for("claude-haiku-4-5").pdfs
    assert credential_test(credential=credential).ok
    assert model_reads(provider="anthropic", model="claude-haiku-4-5") == Reads(images=True)
    assert model_reads(provider="anthropic", model="claude-sonnet-5") == Reads(True, True)
    # Only the listed name itself: a longer one is not the listed model.
    assert model_reads(provider="anthropic", model="claude-haiku-4-5-x").pdfs


def test_an_openai_compatible_list_says_what_each_model_reads_where_it_does(alice, emulator):
    emulator.models["openai"] = ["vendor/eyes", "vendor/words", "vendor/quiet"]
    emulator.input_modalities.update(
        {"vendor/eyes": ["text", "image", "file"], "vendor/words": ["text"]}
    )
    credential = credential_save(
        owner=alice, name="Router", provider="openrouter", base_url=emulator.url + "/v1",
        api_key=KEY,
    )  # fmt: skip
    assert credential_test(credential=credential).models == [
        "vendor/eyes", "vendor/quiet", "vendor/words"
    ]  # fmt: skip
    assert model_reads(provider="openrouter", model="vendor/eyes") == Reads(True, True)
    assert model_reads(provider="openrouter", model="vendor/words") == Reads()
    said = set(ModelReads.objects.values_list("model", flat=True))
    assert said == {"vendor/eyes", "vendor/words"}  # the quiet one: the description decides


def test_a_listing_never_changes_the_admins_setting_and_an_admin_edit_sticks(
    alice, emulator, admin_client
):
    credential = credential_save(
        owner=alice, name="Listed", provider="anthropic", base_url=emulator.url, api_key=KEY
    )
    ModelReads.objects.create(provider="anthropic", model="claude-sonnet", images=False)
    emulator.input_modalities["claude-haiku-4-5"] = ["text"]
    credential_test(credential=credential)
    assert model_reads(provider="anthropic", model="claude-sonnet-5") == Reads()  # the admin's
    listed = ModelReads.objects.get(model="claude-haiku-4-5")
    assert listed.source == ReadsSource.LISTED
    response = admin_client.post(
        reverse("admin:providers_modelreads_change", args=[listed.pk]),
        {"provider": "anthropic", "model": "claude-haiku-4-5", "images": "on"},
    )
    assert response.status_code == 302
    credential_test(credential=credential)  # the list still says text only
    listed.refresh_from_db()
    assert (listed.source, listed.images) == (ReadsSource.ADMIN, True)


def test_lists_that_say_nothing_leave_the_description_in_charge(alice, emulator):
    for provider, base_url in (("openai", emulator.url + "/v1"), ("gemini", emulator.url)):
        credential = credential_save(
            owner=alice, name=provider, provider=provider, base_url=base_url, api_key=KEY
        )
        assert credential_test(credential=credential).ok
    assert not ModelReads.objects.exists()


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
