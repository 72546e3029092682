"""Credential types besides a provider's own API key (issue 24, item 6): Azure OpenAI, a bearer
token and a gateway's custom header. Every call goes through the official SDK to the emulator,
which records the headers each request carried."""

from __future__ import annotations

import asyncio

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from apps.chat.council.posting import message_post
from apps.chat.records.sessions import session_set_provider
from apps.providers.emulator import Script
from apps.providers.models import Credential
from apps.providers.registry import get_adapter
from apps.providers.services import credential_save, credential_test
from apps.providers.types import ChatMessage, ChatRequest, TextDelta
from tests.conftest import wait_settled

KEY = "gw-secret-0123456789-abcd"


def wait_for_reply(reply):
    return wait_settled([reply])[0]


KEY_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key", "x-gateway-key")


def key_headers(recorded) -> dict[str, str]:
    return {name: value for name, value in recorded.headers.items() if name in KEY_HEADERS}


def posted_form(alice, **fields) -> Credential:
    """Save a credential the way a person does: through the form."""
    client = Client()
    client.force_login(alice)
    response = client.post(
        reverse("providers:credential_create"),
        {"name": "Gateway", "api_key": KEY, "auth_style": "api_key", **fields},
    )
    assert response.status_code == 302, response.content.decode()
    return Credential.objects.get(owner=alice, name="Gateway")


CASES = [
    # provider, path under the emulator, form fields, the only key header sent
    ("openai_compatible", "/v1", {"auth_style": "bearer"}, {"authorization": f"Bearer {KEY}"}),
    (
        "openai_compatible",
        "/v1",
        {"auth_style": "header", "auth_header": "X-Gateway-Key"},
        {"x-gateway-key": KEY},
    ),
    ("anthropic", "", {"auth_style": "bearer"}, {"authorization": f"Bearer {KEY}"}),
    (
        "anthropic",
        "",
        {"auth_style": "header", "auth_header": "X-Gateway-Key"},
        {"x-gateway-key": KEY},
    ),
    (
        "openai",
        "/v1",
        {"auth_style": "header", "auth_header": "X-Gateway-Key"},
        {"x-gateway-key": KEY},
    ),
]


@pytest.mark.parametrize(("provider", "path", "fields", "sent"), CASES)
def test_each_way_of_sending_the_key_reaches_the_server_as_that_header_only(
    alice, emulator, provider, path, fields, sent
):
    credential = posted_form(alice, provider=provider, base_url=emulator.url + path, **fields)
    assert KEY not in str(credential.auth())
    check = credential_test(credential=credential)
    assert check.ok, check.message
    assert key_headers(emulator.listings[-1]) == sent
    emulator.script(Script(text="Streamed."))
    assert streamed_text(credential) == "Streamed."
    assert key_headers(emulator.requests[-1]) == sent


def streamed_text(credential: Credential) -> str:
    request = ChatRequest(
        model="m", system=(), max_tokens=50,
        messages=(ChatMessage("user", ({"type": "text", "text": "Hi"},)),),
    )  # fmt: skip

    async def collect() -> str:
        adapter = get_adapter(credential.provider)
        events = adapter.stream(
            request, api_key=credential.api_key(), base_url=credential.base_url,
            auth=credential.auth(),
        )  # fmt: skip
        return "".join([event.text async for event in events if isinstance(event, TextDelta)])

    return asyncio.run(collect())


def test_azure_openai_addresses_the_deployment_with_its_api_version_and_key(alice, emulator):
    credential = posted_form(
        alice, provider="azure_openai", base_url=emulator.url, azure_deployment="gpt-4o-prod"
    )
    assert credential.options["azure_api_version"] == "2024-10-21"  # the default, saved with it
    check = credential_test(credential=credential)
    assert check.ok and check.models == ["gpt-4o-prod"], check.message
    listed = emulator.listings[-1]
    assert listed.path == "/openai/models?api-version=2024-10-21"
    assert key_headers(listed) == {"api-key": KEY}


@pytest.mark.django_db(transaction=True)
def test_a_reply_streams_from_an_azure_deployment_and_a_missing_one_says_so(
    alice, alice_thread, emulator, celery_worker
):
    credential = credential_save(
        owner=alice, name="Azure", provider="azure_openai", base_url=emulator.url,
        api_key=KEY, azure_deployment="gpt-4o-prod", azure_api_version="2025-04-01-preview",
    )  # fmt: skip
    session_set_provider(session=alice_thread.session, credential=credential, model="gpt-4o-prod")
    emulator.script(Script(text="Hello from Azure.", provider="openai"))
    reply = wait_for_reply(message_post(thread=alice_thread, author=alice, text="Hi").replies[0])
    assert (reply.status, reply.text, reply.provider) == (
        "done",
        "Hello from Azure.",
        "azure_openai",
    )
    sent = emulator.requests[-1]
    assert sent.path == (
        "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2025-04-01-preview"
    )
    assert key_headers(sent) == {"api-key": KEY}

    Credential.objects.filter(pk=credential.pk).update(
        options={**credential.options, "azure_deployment": "gone"}
    )
    reply = wait_for_reply(message_post(thread=alice_thread, author=alice, text="Again").replies[0])
    assert reply.status == "error"
    assert "deployment for this resource does not exist" in reply.error
    assert KEY not in reply.error


@pytest.mark.django_db(transaction=True)
def test_a_reply_through_a_gateway_header_carries_no_bearer_token(
    alice, alice_thread, emulator, celery_worker
):
    credential = credential_save(
        owner=alice, name="Gateway", provider="anthropic", base_url=emulator.url, api_key=KEY,
        auth_style="header", auth_header="X-Gateway-Key",
    )  # fmt: skip
    session_set_provider(
        session=alice_thread.session, credential=credential, model="claude-sonnet-5"
    )
    emulator.script(Script(text="Through the gateway.", provider="anthropic"))
    reply = wait_for_reply(message_post(thread=alice_thread, author=alice, text="Hi").replies[0])
    assert (reply.status, reply.text) == ("done", "Through the gateway.")
    assert key_headers(emulator.requests[-1]) == {"x-gateway-key": KEY}


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"provider": "gemini", "auth_style": "bearer"}, "auth_style", "takes: api key"),
        ({"provider": "azure_openai", "auth_style": "bearer"}, "auth_style", "takes: api key"),
        ({"provider": "anthropic", "auth_style": "header"}, "auth_header", "header's name"),
        (
            {"provider": "anthropic", "auth_style": "header", "auth_header": "Content-Type"},
            "auth_header",
            "header's name",
        ),
        ({"provider": "azure_openai", "azure_deployment": "d"}, "base_url", "endpoint"),
        (
            {"provider": "azure_openai", "base_url": "https://r.example"},
            "azure_deployment",
            "deploy",
        ),
        (
            {
                "provider": "azure_openai",
                "base_url": "https://r.example",
                "azure_deployment": "d",
                "azure_api_version": "latest",
            },
            "azure_api_version",
            "2024-10-21",
        ),
        (
            {
                "provider": "openai_compatible",
                "base_url": "http://x.example",
                "auth_style": "bearer",
            },
            "api_key",
            "needs an API key",
        ),
    ],
)
def test_a_wrong_combination_is_refused_on_its_field(alice, fields, field, says):
    with pytest.raises(ValidationError) as caught:
        credential_save(owner=alice, name="Bad", **{"api_key": "", **fields})
    assert field in caught.value.message_dict
    assert says in " ".join(caught.value.message_dict[field])
    assert not Credential.objects.filter(name="Bad").exists()


def test_the_form_keeps_the_azure_fields_and_a_switch_clears_what_no_longer_applies(
    alice, emulator
):
    credential = posted_form(
        alice, provider="azure_openai", base_url=emulator.url, azure_deployment="gpt-4o-prod"
    )
    client = Client()
    client.force_login(alice)
    url = reverse("providers:credential_edit", kwargs={"credential": credential.public_id})
    page = client.get(url).content.decode()
    assert 'value="gpt-4o-prod"' in page and 'value="2024-10-21"' in page
    assert KEY not in page
    client.post(
        url,
        {"name": "Gateway", "provider": "openai_compatible", "base_url": emulator.url + "/v1",
         "auth_style": "header", "auth_header": "X-Gateway-Key", "api_key": "",
         "azure_deployment": "gpt-4o-prod"},
    )  # fmt: skip
    credential.refresh_from_db()
    assert credential.options == {}  # the Azure settings went with the switch
    assert credential.auth_header == "X-Gateway-Key" and credential.api_key() == KEY
