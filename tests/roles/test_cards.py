"""SillyTavern character cards as roles: V2 JSON, V3 PNG (the card in its `ccv3` chunk), a
folder as a pack, hostile cards, and any role or pack taken out as V3 cards that read back."""

from __future__ import annotations

import base64
import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from PIL import Image, PngImagePlugin

from apps.roles.cards import CardError, read_card
from apps.roles.models import Role

pytestmark = pytest.mark.django_db

V2 = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Seraphina",
        "description": "{{char}} is a guardian of the forest glade.",
        "personality": "kind, protective",
        "scenario": "{{user}} wakes up in {{char}}'s glade.",
        "first_mes": "*Seraphina smiles.* You're awake!",
        "mes_example": "<START>\n{{user}}: Who are you?\n{{char}}: A friend of the forest.",
        "creator_notes": "Best with long replies.",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": ["Hello, traveller."],
        "tags": ["fantasy", "guardian"],
        "creator": "someone",
        "character_version": "1.2",
        "extensions": {},
    },
}


def picture(colour=(30, 120, 60), size=(400, 600)) -> Image.Image:
    return Image.new("RGB", size, colour)


def card_png(card: dict, *, chunk: str = "ccv3", image: Image.Image | None = None) -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text(chunk, base64.b64encode(json.dumps(card).encode()).decode())
    out = io.BytesIO()
    (image or picture()).save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def v3(card: dict) -> dict:
    icon = {"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}
    data = {**card["data"], "group_only_greetings": [], "nickname": "Sera", "assets": [icon]}
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": data}


@pytest.fixture
def alice_client(alice):
    client = Client()
    client.force_login(alice)
    return client


def import_cards(client, *files, pack=""):
    uploads = [SimpleUploadedFile(name, data) for name, data in files]
    return client.post("/roles/", {"cards": uploads, "pack": pack})


def test_a_v2_json_card_becomes_a_role_of_its_importer(alice, bob, alice_client):
    response = import_cards(alice_client, ("seraphina.json", json.dumps(V2).encode()))
    assert response.status_code == 200 and "Made 1 role" in response.content.decode()
    role = Role.objects.get(handle="seraphina")
    assert role.owner == alice and role.display_name == "Seraphina"
    assert role.persona.startswith("You are Seraphina.")
    assert "Seraphina is a guardian of the forest glade." in role.persona  # {{char}} filled in
    assert "the person you talk with wakes up in Seraphina's glade." in role.persona
    assert "How Seraphina speaks" in role.persona and "<START>" not in role.persona
    assert "*Seraphina smiles.* You're awake!" in role.persona  # the first message, as style
    assert role.notes == "Best with long replies."
    assert role.card["character"]["tags"] == ["fantasy", "guardian"]
    # Offered to Alice alone: her new-session form has it, Bob's has not.
    assert "@seraphina" in alice_client.get("/").content.decode()
    bob_client = Client()
    bob_client.force_login(bob)
    assert "@seraphina" not in bob_client.get("/").content.decode()
    assert bob_client.get("/roles/seraphina/card.json").status_code == 404


def test_a_v3_png_card_brings_its_picture_re_encoded(alice, alice_client):
    data = card_png(v3(V2), image=picture(size=(800, 1200)))
    import_cards(alice_client, ("sera.png", data))
    role = Role.objects.get(display_name="Seraphina")
    stored = alice_client.get(f"/roles/{role.handle}/avatar.png")
    assert stored.status_code == 200 and stored["Content-Type"] == "image/png"
    shown = Image.open(io.BytesIO(b"".join(stored.streaming_content)))
    assert max(shown.size) == 512 and not shown.info.get("ccv3")  # shrunk, the card not kept in it
    assert role.card["character"]["nickname"] == "Sera"


def test_a_v2_png_card_in_the_chara_chunk_reads_too():
    card = read_card(card_png(V2, chunk="chara"), "old.png")
    assert card.name == "Seraphina" and card.picture


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("photo.png", None, "picture without a character card"),
        (
            "nameless.json",
            json.dumps({"spec": "chara_card_v2", "data": {"name": ""}}).encode(),
            "no name",
        ),
        ("list.json", b"[1, 2]", "JSON object"),
        ("bad.json", b"{not json", "neither a card PNG nor card JSON"),
        ("huge.json", b"{" + b" " * (21 * 1024 * 1024) + b"}", "over 20 MB"),
    ],
)
def test_files_that_are_not_cards_are_refused_in_words(name, data, says):
    if data is None:
        out = io.BytesIO()
        picture().save(out, format="PNG")
        data = out.getvalue()
    with pytest.raises(CardError, match=says):
        read_card(data, name)


def test_hostile_cards_stay_text_and_pages_escape_them(alice, alice_client):
    hostile = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    card = {"spec": "chara_card_v2", "data": {
        "name": f"Eve {hostile}\x00", "description": hostile * 3, "creator_notes": hostile,
        "personality": "x" * 80_000, "first_mes": hostile}}  # fmt: skip
    response = import_cards(alice_client, ("eve.json", json.dumps(card).encode()))
    role = Role.objects.get(owner=alice)
    assert "\x00" not in role.display_name and len(role.display_name) <= 80
    assert len(role.persona) < 200_000  # each field capped
    page = alice_client.get("/roles/").content.decode()
    assert "<script>alert(2)</script>" not in page and 'onerror="alert(1)"' not in page
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert response.status_code == 200


def test_a_folder_of_cards_becomes_a_pack_and_exports_as_v3_cards(alice, alice_client):
    files = [
        ("tavern/seraphina.png", card_png(v3(V2))),
        ("tavern/bard.json", json.dumps({"name": "Bard", "description": "sings",
                                          "personality": "merry"}).encode()),  # a V1 card
        ("tavern/readme.txt", b"not a card"),
    ]  # fmt: skip
    response = import_cards(alice_client, *files, pack="Tavern Regulars")
    text = response.content.decode()
    assert "Made 2 roles" in text and "readme.txt" in text
    made = Role.objects.filter(pack="tavern-regulars").values_list("display_name", flat=True)
    assert set(made) == {"Seraphina", "Bard"}
    exported = alice_client.get("/roles/packs/tavern-regulars/cards.zip")
    assert exported.status_code == 200
    with zipfile.ZipFile(io.BytesIO(exported.content)) as archive:
        names = sorted(archive.namelist())
        cards = {name: read_card(archive.read(name), name) for name in names}
    assert names == ["bard.png", "seraphina.png"]
    assert cards["seraphina.png"].picture and cards["bard.png"].name == "Bard"


def test_a_role_exported_as_a_v3_card_reads_back_the_same(alice, alice_client, roles):
    director = Role.objects.get(handle="director")
    png = alice_client.get("/roles/director/card.png")
    assert png.status_code == 200 and png["Content-Type"] == "image/png"
    chunks = Image.open(io.BytesIO(png.content)).text
    document = json.loads(base64.b64decode(chunks["ccv3"]))
    assert document["spec"] == "chara_card_v3" and document["data"]["name"] == director.display_name
    assert json.loads(base64.b64decode(chunks["chara"]))["spec"] == "chara_card_v2"
    again = read_card(png.content, "director.png")
    assert (again.name, again.persona, again.colour) == (
        director.display_name, director.persona, director.colour)  # fmt: skip
    as_json = alice_client.get("/roles/director/card.json")
    assert json.loads(as_json.content)["data"]["extensions"]["parley"]["handle"] == "director"
    assert alice_client.get("/roles/director/card.exe").status_code == 404


def test_only_ones_own_roles_can_be_deleted(alice, bob, alice_client, roles):
    import_cards(alice_client, ("s.json", json.dumps(V2).encode()))
    bob_client = Client()
    bob_client.force_login(bob)
    assert bob_client.post("/roles/seraphina/delete/").status_code == 404
    assert alice_client.post("/roles/director/delete/").status_code == 403
    assert alice_client.post("/roles/seraphina/delete/").status_code == 302
    assert not Role.objects.filter(handle="seraphina").exists()


def test_a_characters_picture_shows_only_where_it_speaks(alice, bob, alice_client, roles):
    from apps.chat.records.rooms import member_add
    from apps.chat.records.sessions import session_create

    import_cards(alice_client, ("sera.png", card_png(v3(V2))))
    seraphina = Role.objects.get(handle="seraphina")
    bob_client = Client()
    bob_client.force_login(bob)
    assert bob_client.get("/roles/seraphina/avatar.png").status_code == 404
    session = session_create(owner=alice, name="Glade", roles=[seraphina])
    member_add(session=session, by=alice, username="bob")
    assert bob_client.get("/roles/seraphina/avatar.png").status_code == 200
    assert alice_client.get("/roles/director/avatar.png").status_code == 404  # no picture


def test_a_cards_short_description_has_its_placeholders_filled(alice, alice_client):
    import_cards(alice_client, ("seraphina.json", json.dumps(V2).encode()))
    assert Role.objects.get(handle="seraphina").description == (
        "Seraphina is a guardian of the forest glade."
    )


SAME = ("display_name", "description", "persona", "colour", "icon", "output_rules",
        "answers_last", "can_write", "notes")  # fmt: skip


def test_every_shipped_role_exports_and_imports_back_the_same(alice, alice_client, roles):
    """Each role Parley ships, taken out as a card and brought back by a person: the same
    role, but for its handle (each person's is their own) and its owner."""
    shipped = list(Role.objects.filter(owner__isnull=True))
    assert len(shipped) >= 6
    for role in shipped:
        card = alice_client.get(f"/roles/{role.handle}/card.png")
        response = import_cards(alice_client, (f"{role.handle}.png", card.content))
        assert response.status_code == 200, response.content[:300]
        again = Role.objects.filter(owner=alice).latest("pk")
        assert {f: getattr(again, f) for f in SAME} == {f: getattr(role, f) for f in SAME}, (
            role.handle
        )


def test_other_applications_extensions_survive_import_and_export(alice, alice_client):
    card = v3(V2)
    card["data"]["extensions"] = {"talkativeness": "0.5", "fav": True, "world": "Glade",
                                  "depth_prompt": {"prompt": "Stay kind.", "depth": 4}}  # fmt: skip
    import_cards(alice_client, ("seraphina.json", json.dumps(card).encode()))
    role = Role.objects.get(owner=alice, display_name="Seraphina")
    exported = json.loads(alice_client.get(f"/roles/{role.handle}/card.json").content)
    extensions = exported["data"]["extensions"]
    assert {k: v for k, v in extensions.items() if k != "parley"} == card["data"]["extensions"]


def test_a_characters_greeting_opens_each_new_chat(alice, roles):
    """As in the application the card came from: its first message opens a session and each
    new chat, {{user}} being the person; the roles read it as the chat's start."""
    from apps.chat.council.posting import message_post
    from apps.chat.council.requests import request_for_reply
    from apps.chat.models import Message
    from apps.chat.records.sessions import session_create
    from apps.chat.records.threads import thread_create
    from apps.roles.services import role_from_card

    role = role_from_card(owner=alice, card=read_card(json.dumps(V2).encode(), "s.json"))
    session = session_create(owner=alice, name="Glade", roles=[*roles[:1], role])
    (greeting,) = Message.objects.filter(thread=session.active_thread)
    assert greeting.speaker == role.handle and greeting.status == "done"
    assert greeting.text == "*Seraphina smiles.* You're awake!"
    posted = message_post(thread=session.active_thread, author=alice, text="@seraphina hi")
    assert "You're awake!" in str(request_for_reply(message=posted.replies[0]).messages)
    fresh = thread_create(session=session)
    assert [m.text for m in Message.objects.filter(thread=fresh)] == [greeting.text]
    # A session of roles without cards starts empty.
    plain = session_create(owner=alice, name="Crew", roles=roles)
    assert not Message.objects.filter(thread=plain.active_thread).exists()
