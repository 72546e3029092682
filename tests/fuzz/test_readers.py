"""Every reader of an untrusted file, fuzzed (issue 45): real exports, zips, cards, images, PDFs
and text, mutated in their structure (a value swapped for any JSON) and in their bytes
(flipped, cut, spliced), and random bytes besides. The property is the same for each: a
documented refusal or a correct reading, never another exception, and the reading's memory
stays bounded. Hypothesis runs a fixed budget from a fixed seed (derandomized), so `make test`
takes the same time and finds the same things on every run; a failure prints the example.
"""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.attachments.sniff import Refused, Sniffed, avatar, pdf_first_page, pdf_text, sniff
from apps.imports.layout import layout
from apps.imports.scanning import scan
from apps.imports.sources.reading import UnreadableFile, read_export
from apps.roles.cards import Card, CardError, read_card
from tests.attachments.test_sniff import image_bytes, text_pdf
from tests.imports.exports import (
    PNG_1PX,
    chatgpt_trip,
    chatgpt_with_image,
    claude_conversation,
    librechat_export,
    openwebui_chat,
)
from tests.roles.test_cards import V2, card_png, v3

BUDGET = settings(
    max_examples=120, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)  # fmt: skip
MEMORY_BOUND = 64 * 1024 * 1024  # what one small hostile file may cost a reader, at most

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                  max_size=4),
    max_leaves=12,
)  # fmt: skip
EXPORTS = [
    [chatgpt_trip("c-1"), chatgpt_with_image("c-2")],
    [claude_conversation()],
    [openwebui_chat()],
    librechat_export(nested=True),
    librechat_export(nested=False),
]


def paths_of(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON document, as the keys and indexes that lead to it."""
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths_of(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += paths_of(inner, (*prefix, index))
    return found


def replaced(document: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    copy = json.loads(json.dumps(document))
    holder = copy
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = value
    return copy


@st.composite
def mutated_documents(draw, documents: list[Any]) -> Any:
    document = draw(st.sampled_from(documents))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths_of(document)))
        document = replaced(document, path, draw(JSON))
    return document


@st.composite
def mutated_bytes(draw, originals: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(originals)))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        kind = draw(st.sampled_from(["flip", "cut", "splice", "repeat"]))
        at = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[at:]
        elif kind == "splice":
            data[at:at] = draw(st.binary(max_size=64))
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 64))] * draw(st.integers(2, 50))
    return bytes(data)


def bounded(function, *args) -> Any:
    """`function(*args)` with the memory it allocates measured, and held to MEMORY_BOUND."""
    tracemalloc.start()
    try:
        result = function(*args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND, f"{peak / 1048576:.0f} MB"
    return result


def read_all(path: Path) -> None:
    """What the worker does with a file: the preview, then each conversation laid out."""
    try:
        preview = scan(path, imported=set())
        for entry in read_export(path):
            if entry.conversation is None:
                assert entry.broken  # a reason, for the person
            else:
                planned = layout(entry.conversation)
                written = sum(len(plan.messages) for plan in planned.threads)
                assert written <= len(entry.conversation.messages) * (planned.branches + 1)
        json.dumps(preview)  # it is stored as JSON
    except UnreadableFile as exc:
        assert str(exc)


@BUDGET
@given(document=mutated_documents(EXPORTS))
def test_a_mutated_export_is_read_or_refused(tmp_path_factory, document):
    path = tmp_path_factory.mktemp("fuzz") / "conversations.json"
    path.write_text(json.dumps(document))
    bounded(read_all, path)


@BUDGET
@given(data=mutated_bytes([json.dumps(doc).encode() for doc in EXPORTS]) | st.binary(max_size=300))
def test_mutated_export_bytes_are_read_or_refused(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "conversations.json"
    path.write_bytes(data)
    bounded(read_all, path)


def export_zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("conversations.json", json.dumps([chatgpt_with_image("c-z")]))
        archive.writestr("file-Ab12Cd34Ef56-photo.png", PNG_1PX)
    return out.getvalue()


@BUDGET
@given(data=mutated_bytes([export_zip()]))
def test_a_mutated_zip_is_read_or_refused(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "export.zip"
    path.write_bytes(data)
    bounded(read_all, path)


CARDS_JSON = [V2, v3(V2)]


def card_outcome(data: bytes, name: str) -> None:
    try:
        card = read_card(data, name)
    except CardError as exc:
        assert str(exc)
    else:
        assert isinstance(card, Card) and card.name


@BUDGET
@given(document=mutated_documents(CARDS_JSON))
def test_a_mutated_card_is_read_or_refused(document):
    bounded(card_outcome, json.dumps(document).encode(), "card.json")


@BUDGET
@given(data=mutated_bytes([card_png(V2, chunk="chara"), card_png(v3(V2))]))
def test_mutated_card_png_bytes_are_read_or_refused(data):
    bounded(card_outcome, data, "card.png")


def sniffed(data: bytes, name: str) -> None:
    try:
        kept = sniff(data, name)
    except Refused as exc:
        assert str(exc)
        return
    assert isinstance(kept, Sniffed) and kept.data
    if kept.kind == "pdf":
        assert isinstance(pdf_text(kept.data), str)
        pdf_first_page(kept.data)  # a picture, or None
    if kept.kind == "image":
        avatar(kept.data, name)


IMAGES = [image_bytes(fmt, size=(24, 16)) for fmt in ("PNG", "JPEG", "WEBP", "GIF")]


@BUDGET
@given(data=mutated_bytes(IMAGES), name=st.sampled_from(["a.png", "a.jpg", "a", "a.txt"]))
def test_a_mutated_image_is_kept_or_refused(data, name):
    bounded(sniffed, data, name)


@BUDGET
@given(data=mutated_bytes([text_pdf("Numbers", "More")]))
def test_a_mutated_pdf_is_kept_or_refused(data):
    bounded(sniffed, data, "report.pdf")


@BUDGET
@given(data=st.binary(max_size=400) | st.text(max_size=200).map(str.encode),
       name=st.sampled_from(["notes.txt", "a.md", "x.svg", "data.csv", "noext"]))  # fmt: skip
def test_any_bytes_as_a_text_file_are_kept_or_refused(data, name):
    bounded(sniffed, data, name)


@pytest.mark.parametrize("name", ["a.png", "card.png"])
def test_the_fuzzed_readers_really_read_their_seeds(name):
    """The seeds are good files: a fuzz run that refuses everything would prove nothing."""
    assert sniff(IMAGES[0], name).kind == "image"
    assert read_card(card_png(v3(V2)), name).name == "Seraphina"
