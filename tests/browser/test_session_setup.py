"""Setting a session up as design 004 asks (issue 14, items 8 and 9), in Chromium: the create
dialog, the provider filter, the persona library and the memory editor."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from apps.accounts.models import Persona
from apps.chat.models import Session
from apps.providers.services import credential_save
from apps.roles.services import role_pack_load
from tests.browser.test_live_chat import log_in
from tests.deadlines import scaled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LOCAL = "Local · OpenAI-compatible server"


def visible_options(select) -> list[str]:
    return select.evaluate(
        "s => Array.from(s.options).filter(o => !o.hidden).map(o => o.textContent.trim())"
    )


def test_create_a_session_in_the_dialog_with_everything_set(
    page, alice, roles, emulated_anthropic, emulator
):
    credential_save(
        owner=alice, name="Local", provider="openai_compatible",
        base_url=emulator.url + "/v1", api_key="",
    )  # fmt: skip
    Persona.objects.create(owner=alice, name="Documentarian", text="I make documentaries.")
    role_pack_load("engineering-council")
    log_in(page)
    page.get_by_role("button", name="New session").click()
    dialog = page.get_by_role("dialog", name="New session")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Session name").fill("Lighthouse film")

    # The provider only narrows the credential list; the model list follows the credential.
    credential = dialog.get_by_label("Credential", exact=True)
    model = dialog.get_by_label("Model", exact=True)
    dialog.get_by_label("Provider", exact=True).select_option(label="Anthropic")
    assert visible_options(credential) == [f"{emulated_anthropic.name} · Anthropic"]
    expect(credential).to_have_value(str(emulated_anthropic.public_id))
    expect(model).to_have_value("claude-sonnet-5")
    dialog.get_by_label("Provider", exact=True).select_option(label="All providers")
    credential.select_option(label=LOCAL)
    expect(model).not_to_have_value("claude-sonnet-5")
    credential.select_option(label=f"{emulated_anthropic.name} · Anthropic")
    expect(model).to_have_value("claude-sonnet-5")

    # A saved persona is copied in; a new one is added from its own dialog and chosen.
    dialog.get_by_role("tab", name="Context").click()
    expect(dialog.get_by_label("Provider", exact=True)).to_be_hidden()  # one section at a time
    dialog.get_by_label("Saved persona").select_option(label="Documentarian")
    persona = dialog.get_by_label("Your persona in this session")
    expect(persona).to_have_value("I make documentaries.")
    dialog.get_by_role("button", name="Add a persona…").click()
    add = page.get_by_role("dialog", name="Add a persona")
    add.get_by_role("button", name="Save persona").click()  # empty: refused, stays open
    expect(add).to_be_visible()
    add.get_by_label("Name").fill("Sound person")
    add.get_by_label("About you").fill("I record sound on location.")
    add.get_by_role("button", name="Save persona").click()
    expect(add).to_be_hidden()
    expect(dialog.get_by_label("Saved persona")).to_have_value(
        str(Persona.objects.get(name="Sound person").pk)
    )
    expect(persona).to_have_value("I record sound on location.")

    # Memory: plain notes, then the Advanced JSON view, which refuses broken JSON.
    dialog.get_by_role("button", name="Edit memory").click()
    memory = page.get_by_role("dialog", name="Memory")
    memory.get_by_label("Memory as plain text").fill("Budget is small\nShoot in March")
    memory.get_by_role("tab", name="Advanced (JSON)").click()
    json_box = memory.get_by_label("Memory as JSON")
    assert json.loads(json_box.input_value()) == {"notes": ["Budget is small", "Shoot in March"]}
    json_box.fill('{"budget": "small", "shoot": "March"')
    memory.get_by_role("button", name="Done").click()
    expect(memory.get_by_role("alert")).to_contain_text("Not valid JSON yet: line 1, column 37")
    json_box.fill('{\n  "budget": "small"\n  "shoot": "March"\n}')  # a missing comma
    memory.get_by_role("button", name="Done").click()
    expect(memory.get_by_role("alert")).to_contain_text("line 3, column 3")
    # The other common mistakes say where too, whatever the browser's own message holds.
    for broken, where in (
        ('{\n  "budget": "small",\n  "final": True\n}', "line 3, column 12"),  # Python's True
        ('{"shots": [1, 2,]}', "line 1, column 17"),  # a comma before "]"
        ("{'budget': 'small'}", "line 1, column 2"),  # single quotes
    ):
        json_box.fill(broken)
        memory.get_by_role("button", name="Done").click()
        expect(memory.get_by_role("alert")).to_contain_text(f"Not valid JSON yet: {where}")
    expect(memory).to_be_visible()
    json_box.fill('{"budget": "small", "shoot": "March"}')
    memory.get_by_role("button", name="Done").click()
    expect(memory).to_be_hidden()
    expect(dialog.locator("output.memory-preview")).to_contain_text('"shoot": "March"')

    # Roles: a role pack ticks exactly its roles.
    dialog.get_by_role("tab", name="Roles").click()
    dialog.get_by_label("Role pack").select_option("engineering-council")
    expect(dialog.get_by_role("checkbox", name="Director")).not_to_be_checked()
    dialog.get_by_role("checkbox", name="Director").check()
    dialog.get_by_role("button", name="Create session").click()
    expect(page.get_by_role("combobox", name="Message", exact=True)).to_be_visible()

    session = Session.objects.get(name="Lighthouse film")
    assert session.credential == emulated_anthropic and session.model == "claude-sonnet-5"
    assert session.persona == "I record sound on location."
    assert json.loads(session.memory) == {"budget": "small", "shoot": "March"}
    handles = set(session.session_roles.values_list("role__handle", flat=True))
    assert "director" in handles and "editorial_architect" not in handles
    assert "lead_engineer" in handles


def test_a_create_dialog_with_no_roles_says_so_and_keeps_the_rest(page, alice, roles):
    log_in(page)
    page.get_by_role("button", name="New session").click()
    dialog = page.get_by_role("dialog", name="New session")
    dialog.get_by_label("Session name").fill("Nobody here")
    dialog.get_by_role("tab", name="Roles").click()
    for box in dialog.locator("#create-roles input[type=checkbox]").all():
        box.uncheck()
    dialog.get_by_role("button", name="Create session").click()
    expect(dialog.get_by_role("alert")).to_contain_text("Pick at least one role")
    expect(dialog.get_by_label("Session name")).to_have_value("Nobody here")
    assert not Session.objects.filter(name="Nobody here").exists()


def test_settings_have_the_provider_filter_and_the_persona_and_memory_editors(
    chat, emulated_anthropic
):
    Persona.objects.create(owner=chat.session.owner, name="Editor", text="I cut trailers.")
    chat.reload()
    chat.get_by_role("button", name="Session settings").click()
    dialog = chat.get_by_role("dialog", name="Session settings")
    credential = dialog.get_by_label("Credential", exact=True)
    dialog.get_by_label("Provider", exact=True).select_option(label="Demo provider")
    assert visible_options(credential) == ["Demo provider (no network)"]
    dialog.get_by_label("Provider", exact=True).select_option(label="Anthropic")
    expect(credential).to_have_value(str(emulated_anthropic.public_id))
    dialog.get_by_role("tab", name="Context").click()
    dialog.get_by_label("Saved persona").select_option(label="Editor")
    dialog.get_by_role("button", name="Edit memory").click()
    memory = chat.get_by_role("dialog", name="Memory")
    memory.get_by_label("Memory as plain text").fill("Trailer due Friday")
    memory.get_by_role("button", name="Done").click()
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden(timeout=scaled(5_000))
    session = Session.objects.get(pk=chat.session.pk)
    assert session.credential == emulated_anthropic
    assert session.persona == "I cut trailers." and session.memory == "Trailer due Friday"
    # Opened again, the picker shows the persona whose text the session holds.
    chat.get_by_role("button", name="Session settings").click()
    dialog.get_by_role("tab", name="Context").click()
    expect(dialog.get_by_label("Saved persona")).to_have_value(
        str(Persona.objects.get(name="Editor").pk)
    )


def test_the_credential_form_shows_only_the_fields_of_the_chosen_type(page, alice, roles):
    log_in(page)
    page.goto("/credentials/new/")
    provider, style = page.get_by_label("Provider"), page.get_by_label("Send the key as")
    deployment, header = page.get_by_label("Deployment"), page.get_by_label("Header name")
    key = page.get_by_label("API key or token")

    provider.select_option("anthropic")
    expect(style).to_be_visible()
    expect(deployment).to_be_hidden()
    expect(header).to_be_hidden()
    style.select_option("header")
    expect(header).to_be_visible()

    provider.select_option("azure_openai")
    expect(deployment).to_be_visible()
    expect(page.get_by_label("API version")).to_be_visible()
    expect(style).to_be_hidden()
    expect(header).to_be_hidden()
    expect(key).to_be_visible()

    provider.select_option("demo")
    expect(key).to_be_hidden()
    expect(page.get_by_label("Base URL")).to_be_hidden()

    # A preset's own settings and its default address (its description, nothing else).
    provider.select_option("openrouter")
    expect(page.get_by_label("Your app's URL")).to_be_visible()
    expect(page.get_by_label("Your app's name")).to_be_visible()
    expect(page.locator(".hint-openrouter")).to_contain_text("openrouter.ai/api/v1")
    expect(deployment).to_be_hidden()
    expect(style).to_be_hidden()  # OpenRouter takes its key one way only
    provider.select_option("ollama")
    expect(page.locator(".hint-ollama")).to_contain_text("localhost:11434")
    expect(page.get_by_label("Your app's URL")).to_be_hidden()
    expect(key).to_be_visible()
