"""The OpenRouter preset: a description alone (apps/providers/presets/openrouter.py), served
by the OpenAI-compatible adapter through the official SDK, against the emulator."""

from __future__ import annotations

import pytest

from apps.chat.council.posting import message_post
from apps.chat.records.sessions import session_set_provider
from apps.providers.emulator import Script
from apps.providers.registry import describe
from apps.providers.services import credential_save, credential_test
from tests.providers.test_credential_types import KEY, key_headers, posted_form, wait_for_reply


def test_its_default_address_and_its_optional_headers(alice, emulator):
    saved = credential_save(owner=alice, name="Default", provider="openrouter", api_key=KEY)
    assert saved.base_url == "https://openrouter.ai/api/v1"
    credential = posted_form(
        alice, provider="openrouter", base_url=emulator.url + "/v1",
        http_referer="https://parley.example", x_title="Parley council",
    )  # fmt: skip
    assert credential.options == {"http_referer": "https://parley.example",
                                  "x_title": "Parley council"}  # fmt: skip
    check = credential_test(credential=credential)
    assert check.ok, check.message
    listed = emulator.listings[-1]
    assert key_headers(listed) == {"authorization": f"Bearer {KEY}"}
    assert (listed.headers["http-referer"], listed.headers["x-title"]) == (
        "https://parley.example",
        "Parley council",
    )


def test_a_bad_app_url_is_refused_on_its_field(alice):
    with pytest.raises(Exception) as caught:
        credential_save(owner=alice, name="Bad", provider="openrouter", api_key=KEY,
                        http_referer="not a url")  # fmt: skip
    assert "URL" in " ".join(caught.value.message_dict["http_referer"])


def test_a_key_is_needed(alice):
    with pytest.raises(Exception) as caught:
        credential_save(owner=alice, name="No key", provider="openrouter")
    assert "api_key" in caught.value.message_dict


@pytest.mark.django_db(transaction=True)
def test_a_reply_streams_with_a_vendor_model_name_and_the_app_headers(
    alice, alice_thread, emulator, celery_worker
):
    credential = credential_save(
        owner=alice, name="OpenRouter", provider="openrouter", base_url=emulator.url + "/v1",
        api_key=KEY, x_title="Parley council",
    )  # fmt: skip
    session_set_provider(
        session=alice_thread.session, credential=credential, model="anthropic/claude-sonnet-4"
    )
    emulator.script(Script(text="Routed.", provider="openai"))
    reply = wait_for_reply(message_post(thread=alice_thread, author=alice, text="Hi").replies[0])
    assert (reply.status, reply.text, reply.provider) == ("done", "Routed.", "openrouter")
    sent = emulator.requests[-1]
    assert sent.body["model"] == "anthropic/claude-sonnet-4"
    assert sent.headers["x-title"] == "Parley council" and "http-referer" not in sent.headers
    assert sent.body["max_tokens"] == describe("openrouter").max_tokens_for(
        "anthropic/claude-sonnet-4"
    )


def test_what_its_models_read_follows_the_vendor():
    openrouter = describe("openrouter")
    assert openrouter.reads_for("anthropic/claude-sonnet-4").pdfs
    assert openrouter.reads_for("meta-llama/llama-3.1-8b").describe() == "text only"
    assert openrouter.cheap_model == "openai/gpt-4.1-mini"
