"""Character cards (SillyTavern's format, specs V1, V2 and V3) read as roles and roles written
as V3 cards: JSON, or a PNG whose `ccv3` (V3) or `chara` (V2) text chunk holds the card as
base64 JSON. Cards are untrusted: sizes are capped, text is stored as text (pages escape it),
and the picture is re-encoded before it is kept. No database here: `services` writes."""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from PIL import Image, PngImagePlugin

from apps.attachments.sniff import Refused, avatar
from apps.attachments.text import storable
from apps.roles.lorebook import Book, book_document, read_book
from apps.roles.models import Role

MAX_CARD_FILE_BYTES = 20 * 1024 * 1024  # a card PNG is its character's full-size picture
MAX_CARD_JSON_BYTES = 2 * 1024 * 1024
MAX_FIELD_CHARS = 50_000
MAX_LIST_ITEMS = 50
# What a card keeps that Parley has no field for; exported again as it came.
KEPT = ("first_mes", "alternate_greetings", "mes_example", "tags", "creator",
        "character_version", "system_prompt", "post_history_instructions", "nickname",
        "group_only_greetings", "source", "creation_date", "modification_date",
        "personality", "scenario", "description")  # fmt: skip


V2_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example",
             "creator_notes", "system_prompt", "post_history_instructions",
             "alternate_greetings", "character_book", "tags", "creator", "character_version",
             "extensions")  # fmt: skip


class CardError(ValueError):
    """The file is not a card Parley can read; the message says why."""


@dataclass
class Card:
    name: str
    description: str = ""
    persona: str = ""
    notes: str = ""
    kept: dict[str, Any] = field(default_factory=dict)
    picture: bytes = b""  # re-encoded PNG, or empty
    colour: str = ""  # a card Parley wrote: the role's own
    icon: str = ""
    # A card Parley wrote: how the role takes part (its output rules, whether it answers
    # last, whether it may use write tools) comes back as it was.
    output_rules: str = ""
    answers_last: bool = False
    can_write: bool = False
    # Other applications' extensions, kept as they came and written back on export (the V2
    # spec: an editor must not destroy what it does not understand).
    extensions: dict[str, Any] = field(default_factory=dict)
    lorebook: Book = field(default_factory=Book)


def read_card(data: bytes, filename: str) -> Card:
    """A card from a `.json` or `.png` file's bytes; CardError in a sentence when it is not."""
    if len(data) > MAX_CARD_FILE_BYTES:
        raise CardError(f"“{filename}” is over {MAX_CARD_FILE_BYTES // 1_048_576} MB.")
    picture = b""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        raw = _png_card_text(data, filename)
        try:
            picture = avatar(data, filename).data
        except Refused as exc:
            raise CardError(str(exc)) from None
    else:
        raw = data
    if len(raw) > MAX_CARD_JSON_BYTES:
        raise CardError(
            f"“{filename}”: its card is over {MAX_CARD_JSON_BYTES // 1_048_576} MB of JSON."
        )
    try:
        document = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CardError(f"“{filename}” is neither a card PNG nor card JSON.") from None
    except RecursionError:
        raise CardError(f"“{filename}”: its JSON nests too deep to be a card.") from None
    if not isinstance(document, dict):
        raise CardError(f"“{filename}”: a card is a JSON object.")
    inner = document.get("data")  # V2 and V3 hold the fields in `data`; V1 at the top
    fields: dict[str, Any] = inner if isinstance(inner, dict) else document
    name = _text(fields.get("name"))[:80].strip()
    if not name:
        raise CardError(f"“{filename}”: the card has no name.")
    if not picture:
        picture = _asset_icon(fields.get("assets"), filename)
    kept = {key: _kept(fields.get(key)) for key in KEPT if fields.get(key) not in (None, "", [])}
    extensions = _mapping(fields.get("extensions"))
    own = _mapping(extensions.get("parley"))
    if own.get("picture") is False:  # Parley wrote it for a role without a picture: the PNG's
        picture = b""  # is the stand-in it drew, not the role's
    colour = _text(own.get("colour"))
    return Card(
        name=name,
        description=filled(" ".join(_text(fields.get("description")).split()), name)[:200],
        # A card Parley wrote carries the role's persona as it was: it comes back the same.
        persona=_text(own.get("persona")) or persona_of(name, fields),
        notes=_text(fields.get("creator_notes")),
        kept=kept,
        picture=picture,
        colour=colour if re.fullmatch(r"#[0-9a-fA-F]{6}", colour) else "",
        icon=_text(own.get("icon"))[:8],
        output_rules=_text(own.get("output_rules")),
        answers_last=own.get("answers_last") is True,
        can_write=own.get("can_write") is True,
        extensions={key: value for key, value in extensions.items() if key != "parley"},
        lorebook=read_book(fields.get("character_book")),
    )


def card_document(role: Role, lore: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A role as a V3 card: what its card held, else what the role holds; Parley's own fields
    (persona, colour, icon, output rules) in `extensions.parley`; `lore`, its lorebook's
    entries (LoreEntry's fields), as the card's `character_book`."""
    from_card = "character" in (role.card or {})  # else a role made here: its persona is its prompt
    kept = (role.card or {}).get("character") or {}
    data: dict[str, Any] = {
        "name": role.display_name,
        "description": kept.get("description", role.description),
        "personality": kept.get("personality", ""),
        "scenario": kept.get("scenario", ""),
        "first_mes": kept.get("first_mes", ""),
        "mes_example": kept.get("mes_example", ""),
        "creator_notes": role.notes,
        "system_prompt": kept.get("system_prompt", "") if from_card else role.persona,
        "post_history_instructions": kept.get("post_history_instructions", ""),
        "alternate_greetings": kept.get("alternate_greetings", []),
        "group_only_greetings": kept.get("group_only_greetings", []),
        "tags": kept.get("tags", []),
        "creator": kept.get("creator", ""),
        "character_version": kept.get("character_version", ""),
        "nickname": kept.get("nickname", ""),
        "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}],
        "extensions": {
            **((role.card or {}).get("extensions") or {}),  # other applications', as they came
            "parley": {
                "handle": role.handle, "persona": role.persona, "colour": role.colour,
                "icon": role.icon, "output_rules": role.output_rules,
                "answers_last": role.answers_last, "can_write": role.can_write,
                "picture": bool(role.avatar),
            },
        },
    }  # fmt: skip
    book = (role.card or {}).get("lorebook") or {}
    if lore or book:
        data["character_book"] = book_document(book, lore or [])
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": data}


def persona_of(name: str, fields: dict[str, Any]) -> str:
    """The role's instructions from the card: who it is, its personality and scenario, how it
    speaks (the examples) and how it opens; `{{char}}` is its name, `{{user}}` the person."""
    parts = [f"You are {name}."]
    for label, key in (("", "system_prompt"), ("Description", "description"),
                       ("Personality", "personality"), ("Scenario", "scenario")):  # fmt: skip
        value = _text(fields.get(key)).strip()
        if value:
            parts.append(f"{label}: {value}" if label else value)
    examples = _text(fields.get("mes_example")).replace("<START>", "").strip()
    if examples:
        parts.append(f"How {name} speaks (examples, not things that happened):\n{examples}")
    opening = _text(fields.get("first_mes")).strip()
    if opening:
        parts.append(f"How {name} opens a conversation:\n{opening}")
    closing = _text(fields.get("post_history_instructions")).strip()
    if closing:
        parts.append(closing)
    return filled("\n\n".join(parts), name)


def filled(text: str, name: str) -> str:
    """A card's placeholders as Parley has no template for them: the character and the person."""
    return text.replace("{{char}}", name).replace("{{user}}", "the person you talk with")


def write_card(card: dict[str, Any], picture: bytes | None) -> bytes:
    """A V3 card PNG (with a V2 `chara` chunk beside the `ccv3` one, for older readers)."""
    v3 = json.dumps(card, ensure_ascii=False).encode()
    v2 = json.dumps(v2_card(card), ensure_ascii=False).encode()
    with Image.open(io.BytesIO(picture)) if picture else _blank() as image:
        info = PngImagePlugin.PngInfo()
        info.add_text("chara", base64.b64encode(v2).decode())
        info.add_text("ccv3", base64.b64encode(v3).decode())
        out = io.BytesIO()
        image.save(out, format="PNG", pnginfo=info)
        return out.getvalue()


def v2_card(card: dict[str, Any]) -> dict[str, Any]:
    """A V3 card as the V2 spec has it: only V2's fields, its lorebook's entries without V3's
    `use_regex` (a V2 reader must not meet fields it does not know at the top of `data`)."""
    data = {key: value for key, value in card["data"].items() if key in V2_FIELDS}
    book = data.get("character_book")
    if isinstance(book, dict):
        entries = [
            {k: v for k, v in entry.items() if k != "use_regex"} for entry in book["entries"]
        ]
        data["character_book"] = {**book, "entries": entries}
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def _blank() -> Image.Image:
    return Image.new("RGB", (400, 600), (100, 116, 139))


def _png_card_text(data: bytes, filename: str) -> bytes:
    """The card in a PNG's text chunks, read chunk by chunk (not through a decoder that
    would also inflate the pixels): `ccv3` first, else `chara`."""
    found: dict[str, bytes] = {}
    position = 8
    while position + 8 <= len(data):
        length = int.from_bytes(data[position : position + 4], "big")
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        position += 12 + length
        if kind == b"IEND":
            break
        if kind in (b"tEXt", b"zTXt", b"iTXt") and b"\x00" in body:
            keyword, rest = body.split(b"\x00", 1)
            if keyword in (b"ccv3", b"chara"):
                found[keyword.decode()] = _chunk_text(kind, rest)
    encoded = found.get("ccv3") or found.get("chara")
    if encoded is None:
        raise CardError(f"“{filename}” is a picture without a character card in it.")
    try:
        return base64.b64decode(encoded, validate=False)
    except (binascii.Error, ValueError):
        raise CardError(f"“{filename}”: its card chunk is not base64.") from None


def _chunk_text(kind: bytes, rest: bytes) -> bytes:
    try:
        if kind == b"zTXt":
            return zlib.decompressobj().decompress(rest[1:], MAX_CARD_JSON_BYTES * 2)
        if kind == b"iTXt":  # compression flag, method, language\0, translated keyword\0, text
            compressed, text = rest[0], rest[2:].split(b"\x00", 2)[-1]
            return (
                zlib.decompressobj().decompress(text, MAX_CARD_JSON_BYTES * 2)
                if compressed
                else text
            )
    except zlib.error:
        return b""
    return rest


def _asset_icon(assets: Any, filename: str) -> bytes:
    """A V3 card's main icon, when it is embedded as a data URL."""
    for asset in assets[:MAX_LIST_ITEMS] if isinstance(assets, list) else []:
        if not isinstance(asset, dict):
            continue
        uri = asset.get("uri")
        if asset.get("type") == "icon" and isinstance(uri, str) and ";base64," in uri[:100]:
            try:
                return avatar(base64.b64decode(uri.split(";base64,", 1)[1]), filename).data
            except (binascii.Error, ValueError, Refused):
                return b""
    return b""


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return storable(value if isinstance(value, str) else "")[:MAX_FIELD_CHARS]


def _kept(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list):
        return [_text(item) for item in value[:MAX_LIST_ITEMS] if isinstance(item, str)]
    return value if isinstance(value, int | float | bool) else None
