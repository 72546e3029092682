"""Images and PDFs on each provider's wire, through the official SDKs (issue 35, item 3;
TECH_NOTES §11.1): the canonical parts name an attachment, its bytes travel in the request's
blobs, and each adapter writes its provider's own parts in the message's order."""

from __future__ import annotations

import base64
import re

import pytest

from apps.providers.emulator import Script
from apps.providers.types import ChatMessage, ChatRequest, TextDelta
from tests.attachments.test_sniff import image_bytes, text_pdf
from tests.providers.test_adapters import PROVIDERS, WIRE, collect

PNG = image_bytes("PNG", size=(32, 24))
PDF = text_pdf("Quarterly figures")


def with_media() -> ChatRequest:
    parts = (
        {"type": "text", "text": "Compare the chart with the report."},
        {"type": "image", "attachment": "img-1", "media_type": "image/png", "name": "chart.png"},
        {"type": "document", "attachment": "doc-1", "media_type": "application/pdf",
         "name": "report.pdf"},
    )  # fmt: skip
    return ChatRequest(
        model="model-x",
        system=(),
        messages=(ChatMessage("user", parts, cache=True),),
        blobs={"img-1": PNG, "doc-1": PDF},
    )


def decoded(data: str) -> bytes:
    """Standard or URL-safe base64, padded or not (Gemini's SDK sends the URL-safe kind)."""
    data = data.replace("-", "+").replace("_", "/")
    return base64.b64decode(data + "=" * (-len(data) % 4))


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_each_provider_gets_the_image_and_the_pdf_in_its_own_parts(kind, emulator):
    emulator.script(Script(text="The chart agrees.", provider=WIRE[kind]))
    events = await collect(kind, emulator, with_media())
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The chart agrees."
    body = emulator.requests[-1].body
    if WIRE[kind] == "anthropic":
        text, image, document = body["messages"][0]["content"]
        assert text == {"type": "text", "text": "Compare the chart with the report."}
        assert image["source"]["type"] == "base64" and image["source"]["media_type"] == "image/png"
        assert decoded(image["source"]["data"]) == PNG
        assert (document["type"], document["title"]) == ("document", "report.pdf")
        assert decoded(document["source"]["data"]) == PDF
        assert document["cache_control"] == {"type": "ephemeral"}  # media in the cached prefix
    elif WIRE[kind] == "openai":
        (message,) = [m for m in body["messages"] if m["role"] == "user"]
        text, image, document = message["content"]
        assert text["type"] == "text"
        prefix, data = image["image_url"]["url"].split(",", 1)
        assert prefix == "data:image/png;base64" and decoded(data) == PNG
        assert document["file"]["filename"] == "report.pdf"
        prefix, data = document["file"]["file_data"].split(",", 1)
        assert prefix == "data:application/pdf;base64" and decoded(data) == PDF
    else:
        text, image, document = body["contents"][0]["parts"]
        assert text == {"text": "Compare the chart with the report."}
        for part, mime, raw in ((image, "image/png", PNG), (document, "application/pdf", PDF)):
            inline = part.get("inlineData") or part["inline_data"]
            assert inline.get("mime_type", inline.get("mimeType")) == mime
            assert decoded(inline["data"]) == raw


async def test_a_part_whose_bytes_are_missing_is_refused_before_anything_is_sent(emulator):
    request = with_media()
    broken = ChatRequest(
        model=request.model, system=(), messages=request.messages, blobs={"img-1": PNG}
    )
    with pytest.raises(ValueError, match="no bytes for attachment doc-1"):
        await collect("anthropic", emulator, broken)
    assert emulator.requests == []


def one_image(media_type: str, data: bytes, *, model: str = "model-x") -> ChatRequest:
    parts = ({"type": "image", "attachment": "img", "media_type": media_type, "name": "x"},)
    return ChatRequest(model=model, system=(), messages=(ChatMessage("user", parts),),
                       blobs={"img": data})  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "request_", "refused"),
    [
        ("anthropic", one_image("image/png", image_bytes("JPEG")),
         "does not match the provided media type image/png"),
        ("anthropic", one_image("image/bmp", PNG), "Input should be 'image/jpeg'"),
        ("openai_compatible", one_image("image/png", PNG, model="llama3.1:8b"),
         "image_url is only supported by certain models"),
        ("openai", one_image("image/tiff", PNG), "expected a base64 data URL"),
        ("gemini", one_image("image/gif", image_bytes("GIF")), "Unsupported MIME type: image/gif"),
    ],
    ids=["anthropic-lying-type", "anthropic-bmp", "no-vision-model", "openai-tiff", "gemini-gif"],
)  # fmt: skip
async def test_the_emulator_refuses_what_each_provider_refuses(kind, request_, refused, emulator):
    """Each provider's refusal of a wrong part, as its API words it, through its SDK: an
    adapter that sent such a part would fail here as it would in production."""
    from apps.providers.types import ProviderError

    emulator.script(Script(text="never streamed", provider=WIRE[kind]))
    with pytest.raises(ProviderError, match=re.escape(refused)):
        await collect(kind, emulator, request_)
    assert len(emulator.scripts) == 1  # refused before any script ran


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_an_image_counts_as_an_image_not_as_its_base64(kind, emulator):
    from apps.providers.types import Usage

    big = noisy_png(800, 600)
    assert len(big) > 1_000_000
    emulator.script(Script(text="Seen.", provider=WIRE[kind]))
    events = await collect(kind, emulator, one_image("image/png", big))
    (usage,) = [e for e in events if isinstance(e, Usage)]
    assert 1_000 < usage.input_tokens < 3_000  # an image's share, not ~450k for its base64


def noisy_png(width: int, height: int) -> bytes:
    """A photo-like PNG that does not compress: about 1.4 MB at 800 by 600."""
    import io
    import os

    from PIL import Image

    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), os.urandom(width * height * 3)).save(out, "PNG")
    return out.getvalue()
