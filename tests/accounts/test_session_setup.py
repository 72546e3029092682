"""The session set-up's services and views (issue 14, items 8 and 9): personas, memory in
JSON, creation with everything chosen, refusals that keep what was typed."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from apps.accounts.models import Persona
from apps.accounts.personas import persona_save, personas_for_user
from apps.chat.council.tools import ToolContext, run_tool
from apps.chat.models import Session
from apps.chat.records.memory import memory_append, memory_from_json
from apps.providers.types import ToolCall

pytestmark = pytest.mark.django_db


def test_a_persona_is_saved_replaced_by_name_and_seen_only_by_its_owner(alice, bob):
    persona_save(owner=alice, name="  Documentarian ", text="I make documentaries.")
    persona_save(owner=alice, name="Documentarian", text="I make long documentaries.")
    assert list(personas_for_user(user=alice).values_list("name", "text")) == [
        ("Documentarian", "I make long documentaries.")
    ]
    assert not personas_for_user(user=bob).exists()
    with pytest.raises(ValidationError) as refused:
        persona_save(owner=alice, name="", text="x" * 20_001)
    assert set(refused.value.message_dict) == {"name", "text"}


def test_the_persona_view_refuses_with_the_reasons_and_keeps_the_text(client, alice):
    client.force_login(alice)
    response = client.post(reverse("persona_create"), {"name": "", "text": "I cut trailers."})
    assert response.status_code == 422
    page = response.content.decode()
    assert "Give the persona a name." in page and "I cut trailers." in page
    response = client.post(
        reverse("persona_create"),
        {"name": "Editor <b>", "text": "I cut trailers.", "picker": "settings-persona-pick"},
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="settings-persona-pick" hx-swap-oob="innerHTML"' in page
    assert "Editor &lt;b&gt;" in page and "<b>" not in page
    assert json.loads(response["HX-Trigger-After-Swap"]) == {
        "parley:persona-saved": {"picker": "settings-persona-pick"}
    }
    # A picker id is an element id the page has, never markup.
    response = client.post(
        reverse("persona_create"), {"name": "X", "text": "Y", "picker": '"><script>'}
    )
    assert "<script>" not in response.content.decode()


def test_memory_in_json_is_validated_and_stays_json_when_a_role_adds_a_note():
    assert memory_from_json('{"budget":"small"}') == '{\n  "budget": "small"\n}'
    with pytest.raises(ValidationError, match="line 1, column"):
        memory_from_json('{"budget": ')
    with pytest.raises(ValidationError, match="object"):
        memory_from_json('"just a string"')
    assert json.loads(memory_append('{"budget": "small"}', "Shoot in March")) == {
        "budget": "small",
        "notes": ["Shoot in March"],
    }
    assert json.loads(memory_append('["a"]', "b")) == ["a", "b"]
    assert memory_append("Budget is small", "Shoot in March") == "Budget is small\nShoot in March"


def test_update_memory_appends_into_a_json_memory(alice_thread):
    session = alice_thread.session
    session.memory = '{"budget": "small"}'
    session.save()
    context = ToolContext(
        session_id=session.pk, thread_id=alice_thread.pk, reply_pk=0,
        role_handle="director", can_write=True,
    )  # fmt: skip
    run_tool(context, ToolCall(id="1", name="update_memory", arguments={"text": "Shoot in March"}))
    session.refresh_from_db()
    assert json.loads(session.memory)["notes"] == ["Shoot in March"]


def test_creating_a_session_with_everything_chosen(client, alice, bob, roles, emulated_anthropic):
    client.force_login(alice)
    persona = Persona.objects.create(owner=alice, name="Doc", text="I make documentaries.")
    director = roles[1]
    data = {
        "name": "Lighthouse",
        "credential": str(emulated_anthropic.public_id),
        "model": "claude-sonnet-5",
        "persona_pick": str(persona.pk),
        "persona": "",  # no script copied it: the server does
        "memory": '{"shoot": "March"}',
        "memory_format": "json",
        "roles": [str(director.pk)],
        "roles_offered": "1",
    }
    response = client.post(reverse("chat:session_create"), data, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "HX-Redirect" in response
    session = Session.objects.get(name="Lighthouse")
    assert session.credential == emulated_anthropic and session.model == "claude-sonnet-5"
    assert session.persona == "I make documentaries."
    assert json.loads(session.memory) == {"shoot": "March"}
    assert list(session.session_roles.values_list("role__handle", flat=True)) == ["director"]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"memory": '{"shoot": ', "memory_format": "json"}, "not valid JSON"),
        ({"roles": []}, "Pick at least one role"),
        ({"credential": "bob"}, "Select a valid choice"),
        ({"persona_pick": "bob"}, "Select a valid choice"),
    ],
)
def test_a_wrong_create_form_is_refused_with_the_reason_and_nothing_made(
    client, alice, bob, roles, change, says
):
    from apps.providers.services import credential_save

    bobs = credential_save(owner=bob, name="Bob's", provider="anthropic", api_key="sk-ant-x")
    bobs_persona = Persona.objects.create(owner=bob, name="Bob", text="Bob's secret life")
    change = {
        key: str(bobs.public_id) if value == "bob" and key == "credential"
        else str(bobs_persona.pk) if value == "bob" else value
        for key, value in change.items()
    }  # fmt: skip
    client.force_login(alice)
    data = {"name": "Kept name", "roles": [str(roles[0].pk)], "roles_offered": "1", **change}
    response = client.post(reverse("chat:session_create"), data, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    page = response.content.decode()
    assert says in page and "Kept name" in page and "Bob's secret" not in page
    assert not Session.objects.filter(name="Kept name").exists()


def test_settings_refuse_broken_json_memory_and_keep_the_text(client, alice_thread):
    client.force_login(alice_thread.session.owner)
    session = alice_thread.session
    url = reverse("chat:session_settings", kwargs={"session": session.public_id})
    form = client.get(url).content.decode()
    assert 'name="memory_format"' in form and "Edit memory" in form
    data = {
        "thread": str(alice_thread.public_id),
        "memory": '{"shoot": ',
        "memory_format": "json",
        "addressing_mode": "sticky",
        "auto_rounds": "0",
        "turn_mode": "broadcast",
        "reply_length": "normal",
        "roles": [str(link.role_id) for link in session.session_roles.all()],
    }
    response = client.post(url, data)
    assert response.status_code == 422
    assert "not valid JSON" in response.content.decode()
    assert "{&quot;shoot&quot;: " in response.content.decode()
    session.refresh_from_db()
    assert session.memory == ""
