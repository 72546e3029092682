"""The Ollama preset: a description alone (apps/providers/presets/ollama.py): local, no key,
OpenAI-compatible, its models listed by the server (the emulator stands in for it)."""

from __future__ import annotations

import pytest

from apps.chat.council.posting import message_post
from apps.chat.records.sessions import session_set_provider
from apps.providers.emulator import Script
from apps.providers.registry import describe
from apps.providers.services import credential_models, credential_save
from tests.providers.test_credential_types import wait_for_reply


def test_it_needs_no_key_and_defaults_to_the_local_server(alice):
    credential = credential_save(owner=alice, name="Laptop", provider="ollama")
    assert credential.base_url == "http://localhost:11434/v1"
    assert credential.api_key() == ""


def test_its_models_come_from_the_server(alice, emulator):
    credential = credential_save(
        owner=alice, name="Laptop", provider="ollama", base_url=emulator.url + "/v1"
    )
    models = credential_models(credential=credential)
    assert models == sorted(emulator.models["openai"])
    assert emulator.listings[-1].path == "/v1/models"


@pytest.mark.django_db(transaction=True)
def test_a_reply_streams_from_a_local_model(alice, alice_thread, emulator, celery_worker):
    credential = credential_save(
        owner=alice, name="Laptop", provider="ollama", base_url=emulator.url + "/v1"
    )
    session_set_provider(session=alice_thread.session, credential=credential, model="llama3.1:8b")
    emulator.script(Script(text="Local and private.", provider="openai"))
    reply = wait_for_reply(message_post(thread=alice_thread, author=alice, text="Hi").replies[0])
    assert (reply.status, reply.text, reply.provider) == ("done", "Local and private.", "ollama")
    assert emulator.requests[-1].body["model"] == "llama3.1:8b"


def test_vision_models_read_images():
    ollama = describe("ollama")
    assert ollama.reads_for("llava:13b").images
    assert not ollama.reads_for("llama3.1:8b").images
