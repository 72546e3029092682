"""Handles are unique per person: one person's roles never share a handle with each other or
with everyone's, another person's private roles are never looked at (a number must not tell
that they exist), and a name in any script gets a readable handle."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from apps.chat.council.posting import message_post
from apps.chat.council.requests import request_for_reply
from apps.chat.display.exports import export_html
from apps.chat.records.sessions import session_create
from apps.chat.web.forms import one_per_handle
from apps.roles.cards import read_card
from apps.roles.models import Role
from apps.roles.services import role_from_card

pytestmark = pytest.mark.django_db


def card(name: str, persona: str = "") -> bytes:
    data = {"name": name, "description": f"{name} of the glade.", "system_prompt": persona}
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}).encode()


def made(owner, name: str, persona: str = "") -> Role:
    return role_from_card(owner=owner, card=read_card(card(name, persona), f"{name}.json"))


def test_two_people_each_get_the_plain_handle_and_nobody_learns_of_the_other(alice, bob):
    bobs = made(bob, "GPT-4", "Bob's private assistant.")
    alices = made(alice, "GPT-4", "Alice's.")
    assert bobs.handle == alices.handle == "gpt-4"  # not "gpt-4-2": Bob's role stays unseen
    assert made(alice, "GPT-4").handle == "gpt-4-2"  # her own second one is numbered


def test_a_persons_role_never_takes_a_handle_of_everyones(alice, roles):
    assert made(alice, "Director").handle == "director-2"
    everyone_s = Role(handle="seraphina", display_name="Seraphina")
    made(alice, "Seraphina")
    with pytest.raises(ValidationError, match="taken"):
        everyone_s.full_clean()  # the admin cannot add an everyone's role a person's shadows


@pytest.mark.parametrize(
    "name, handle",
    [("月纱", "yuesha"), ("Zoë", "zoe"), ("Αθηνά", "athina"), ("😀 Bot", "bot"), ("42", "r-42")],
)
def test_a_name_in_any_script_gets_a_readable_handle(alice, name, handle):
    role = made(alice, name)
    assert role.handle == handle and role.display_name == name


def test_a_session_speaks_with_its_owners_role_of_a_shared_handle(alice, bob, roles):
    made(bob, "Seraphina", "BOB-SECRET persona.")
    mine = made(alice, "Seraphina", "Alice's own persona.")
    session = session_create(owner=alice, name="Glade", roles=[*roles, mine])
    thread = session.active_thread
    posted = message_post(thread=thread, author=alice, text="@seraphina hello")
    sent = str(request_for_reply(message=posted.replies[0]).messages)
    sent += str(request_for_reply(message=posted.replies[0]).system)
    assert "Alice's own persona." in sent and "BOB-SECRET" not in sent
    html, _ = export_html(thread, user=alice)
    assert "Seraphina" in html and "BOB-SECRET" not in html


def test_a_session_cannot_hold_two_roles_of_one_handle(alice, bob):
    clash = [made(alice, "Seraphina"), made(bob, "Seraphina")]
    with pytest.raises(ValidationError, match="@seraphina"):
        one_per_handle(clash)


def test_the_roles_page_shows_each_person_their_own(alice, bob):
    made(bob, "Seraphina", "Bob's")
    made(alice, "Seraphina", "Alice's")
    client = Client()
    client.force_login(alice)
    card_json = client.get("/roles/seraphina/card.json").json()
    assert "Alice's" in card_json["data"]["extensions"]["parley"]["persona"]
