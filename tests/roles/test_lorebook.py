"""A card's lorebook (`character_book`) is kept, used as SillyTavern's World Info is (entries
whose keys the recent conversation says go into that role's context, within a token budget),
edited on the role and exported again."""

from __future__ import annotations

import base64
import io
import json

import pytest
from django.test import Client
from PIL import Image

from apps.chat.council.posting import message_post
from apps.chat.council.requests import request_for_reply
from apps.chat.records.sessions import session_create
from apps.roles.cards import read_card
from apps.roles.lorebook import Lore, lore_for, read_book
from apps.roles.models import LoreEntry
from apps.roles.services import role_from_card

pytestmark = pytest.mark.django_db

BOOK = {
    "name": "Eldoria",
    "scan_depth": 2,
    "token_budget": 200,
    "recursive_scanning": False,
    "extensions": {"world": "eldoria"},
    "entries": [
        {
            "keys": ["glade"],
            "content": "The glade is warded by old runes.",
            "enabled": True,
            "insertion_order": 10,
            "comment": "The glade",
            "id": 7,
            "position": "after_char",
            "extensions": {"depth": 4},
        },
        {
            "keys": ["Shadowfang", "wolves"],
            "content": "Shadowfang leads the wolves.",
            "enabled": True,
            "insertion_order": 5,
            "priority": 3,
        },
        {
            "keys": ["sun"],
            "secondary_keys": ["eclipse"],
            "selective": True,
            "content": "An eclipse weakens the runes.",
            "enabled": True,
            "insertion_order": 20,
        },
        {
            "keys": [],
            "content": "Magic has a price.",
            "constant": True,
            "enabled": True,
            "insertion_order": 1,
        },
        {"keys": ["moon"], "content": "Turned off.", "enabled": False, "insertion_order": 30},
    ],
}


def seraphina(book=BOOK) -> bytes:
    data = {"name": "Seraphina", "description": "A guardian.", "character_book": book}
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}).encode()


def entries() -> list[Lore]:
    return [Lore(**{k: v for k, v in e.items() if k in Lore.__dataclass_fields__})
            for e in read_book(BOOK).entries if e["enabled"]]  # fmt: skip


def test_entries_come_in_by_their_keys_as_words_in_insertion_order():
    chosen = lore_for(entries(), ["The wolves gather near the GLADE."], budget=1000)
    assert [e.content for e in chosen] == [
        "Magic has a price.",  # constant, order 1
        "Shadowfang leads the wolves.",  # order 5
        "The glade is warded by old runes.",  # order 10
    ]
    assert lore_for(entries(), ["It is sunday in the gladehouse."], budget=1000)[1:] == []
    # Selective: the primary key alone is not enough.
    assert "eclipse" not in str(lore_for(entries(), ["The sun rises."], budget=1000))
    both = lore_for(entries(), ["The sun dims: an eclipse."], budget=1000)
    assert "An eclipse weakens the runes." in [e.content for e in both]


def test_over_the_budget_the_lowest_priority_is_left_out_first():
    said = ["wolves in the glade"]
    chosen = lore_for(entries(), said, budget=20)  # room for two of the three
    assert "Shadowfang leads the wolves." not in [e.content for e in chosen]  # priority 3
    assert len(chosen) == 2


def test_a_recursive_book_lets_an_entry_bring_in_another_without_looping():
    a = Lore(content="The runes name Shadowfang.", keys=["runes"], insertion_order=1)
    b = Lore(content="Shadowfang fears the runes.", keys=["shadowfang"], insertion_order=2)
    assert lore_for([a, b], ["the runes glow"], budget=500) == [a]
    assert lore_for([a, b], ["the runes glow"], budget=500, recursive=True) == [a, b]


def test_a_cards_lorebook_is_kept_and_used_in_that_roles_context(alice, roles):
    role = role_from_card(owner=alice, card=read_card(seraphina(), "seraphina.json"))
    assert LoreEntry.objects.filter(role=role).count() == 5
    session = session_create(owner=alice, name="Glade", roles=[*roles, role])
    thread = session.active_thread
    posted = message_post(
        thread=thread, author=alice, text="@seraphina @director are the wolves near?"
    )
    by_speaker = {reply.speaker: reply for reply in posted.replies}
    request = request_for_reply(message=by_speaker["seraphina"])
    last = str(request.messages[-1])
    assert "Shadowfang leads the wolves." in last and "Magic has a price." in last
    assert "warded by old runes" not in last  # not said
    assert request.metadata["lore"] == ["constant", "Shadowfang, wolves"]  # for its Details
    # Other roles never get it, and the system prompt (the shared cache) stays the same.
    other = request_for_reply(message=by_speaker["director"])
    assert "Shadowfang" not in str(other.messages[-1]) and "lore" not in other.metadata
    assert "Shadowfang" not in str(request.system)


def test_the_lorebook_is_edited_on_the_role_and_exported_with_it(alice, bob):
    role = role_from_card(owner=alice, card=read_card(seraphina(), "seraphina.json"))
    client = Client()
    client.force_login(alice)
    page = client.get(f"/roles/{role.handle}/lorebook/")
    assert page.status_code == 200 and "Shadowfang leads the wolves." in page.content.decode()
    form = page.context["formset"]
    data = {"lore-TOTAL_FORMS": str(len(form.forms)), "lore-INITIAL_FORMS": "5",
            "lore-MIN_NUM_FORMS": "0", "lore-MAX_NUM_FORMS": "1000",
            "scan_depth": "3", "token_budget": "300"}  # fmt: skip
    for index, entry in enumerate(LoreEntry.objects.filter(role=role)):
        data.update({
            f"lore-{index}-id": str(entry.pk), f"lore-{index}-name": entry.name,
            f"lore-{index}-keys": ", ".join(entry.keys), f"lore-{index}-content": entry.content,
            f"lore-{index}-enabled": "on", f"lore-{index}-insertion_order": entry.insertion_order,
            f"lore-{index}-priority": entry.priority,
            f"lore-{index}-constant": "on" if entry.constant else "",
        })  # fmt: skip
    data["lore-1-keys"] = "Shadowfang, wolves, pack"  # a key added
    data["lore-4-DELETE"] = "on"  # the disabled one deleted
    new = len(form.forms) - 1
    data.update({f"lore-{new}-keys": "river", f"lore-{new}-content": "The river runs north.",
                 f"lore-{new}-enabled": "on", f"lore-{new}-insertion_order": "40",
                 f"lore-{new}-priority": "10"})  # fmt: skip
    saved = client.post(f"/roles/{role.handle}/lorebook/", data)
    assert saved.status_code == 200, saved.content.decode()[:2000]
    assert LoreEntry.objects.filter(role=role).count() == 5
    assert LoreEntry.objects.get(role=role, content__startswith="Shadowfang").keys[-1] == "pack"
    # Bob can neither see nor change Alice's.
    other = Client()
    other.force_login(bob)
    assert other.get(f"/roles/{role.handle}/lorebook/").status_code == 404
    # Exported, it comes back the same: entries, the book's settings and what Parley keeps.
    card = client.get(f"/roles/{role.handle}/card.json").json()["data"]["character_book"]
    assert card["scan_depth"] == 3 and card["token_budget"] == 300
    assert card["extensions"] == {"world": "eldoria"}
    glade = next(e for e in card["entries"] if e["comment"] == "The glade")
    assert glade["id"] == 7 and glade["position"] == "after_char"
    assert glade["extensions"] == {"depth": 4}
    assert {e["content"] for e in card["entries"]} >= {"The river runs north."}
    png = client.get(f"/roles/{role.handle}/card.png")
    again = read_card(b"".join(png.streaming_content) if png.streaming else png.content, "x.png")
    assert len(again.lorebook.entries) == 5 and again.lorebook.settings["scan_depth"] == 3


def test_the_v2_chunk_is_a_v2_card_and_a_role_without_a_picture_stays_without(alice, roles):
    client = Client()
    client.force_login(alice)
    png = client.get("/roles/director/card.png").content
    chunks = Image.open(io.BytesIO(png)).text
    v2 = json.loads(base64.b64decode(chunks["chara"]))
    assert v2["spec"] == "chara_card_v2" and "assets" not in v2["data"]
    assert "nickname" not in v2["data"] and "group_only_greetings" not in v2["data"]
    assert not read_card(png, "director.png").picture  # the grey stand-in is not a picture
    # A card with only a name gets no invented system prompt on its way out.
    only = role_from_card(owner=alice, card=read_card(b'{"name": "Quill"}', "quill.json"))
    out = client.get(f"/roles/{only.handle}/card.json").json()["data"]
    assert out["system_prompt"] == ""


def test_a_hostile_lorebook_is_bounded_and_stays_text():
    book = {"entries": [{"keys": ["a" * 10_000] * 500, "content": "<script>x</script>" * 5,
                         "insertion_order": float("nan"), "priority": "high"}] * 2000
            + [{"keys": "not a list"}, 42, None]}  # fmt: skip
    read = read_book(book)
    assert len(read.entries) == 500
    entry = read.entries[0]
    assert len(entry["keys"]) == 50 and len(entry["keys"][0]) == 200
    assert entry["insertion_order"] == 100 and entry["priority"] == 10
    assert read_book("nonsense").entries == [] and read_book({"entries": "x"}).entries == []
