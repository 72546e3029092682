"""What an uploaded file really is, and the safe copy kept of it (issue 35, item 2)."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image
from pypdf import PdfWriter

from apps.attachments.sniff import MAX_EDGE, MAX_STORED_IMAGE_BYTES, Refused, pdf_text, sniff


def image_bytes(fmt: str, size=(64, 48), mode="RGB", **save) -> bytes:
    out = io.BytesIO()
    Image.new(mode, size, "teal").save(out, format=fmt, **save)
    return out.getvalue()


def text_pdf(*pages: str) -> bytes:
    """A real PDF with a line of text on each page (pypdf builds the objects)."""
    from pypdf.generic import (
        ArrayObject,
        DecodedStreamObject,
        DictionaryObject,
        NameObject,
        NumberObject,
    )  # fmt: skip

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"),
    }))  # fmt: skip
    for words in pages:
        page = writer.add_blank_page(width=300, height=200)
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 12 Tf 20 100 Td ({words}) Tj ET".encode())
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject({
            NameObject("/Font"): DictionaryObject({NameObject("/F1"): font}),
        })  # fmt: skip
        page[NameObject("/MediaBox")] = ArrayObject([NumberObject(n) for n in (0, 0, 300, 200)])
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("fmt", "stored"),
    [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/jpeg"), ("GIF", "image/png")],
)
def test_each_image_type_is_kept_in_a_type_every_provider_reads(fmt, stored):
    kept = sniff(image_bytes(fmt), "picture.bin")  # the name says nothing; the bytes do
    assert (kept.kind, kept.media_type, kept.width, kept.height) == ("image", stored, 64, 48)
    assert Image.open(io.BytesIO(kept.data)).format == stored.split("/")[1].upper()


def test_metadata_and_a_hidden_payload_are_gone_and_orientation_applied():
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated: the picture is shown 90° turned
    exif[0x8825] = {2: (51.0, 30.0, 0.0)}  # GPS
    photo = image_bytes("JPEG", size=(80, 40), exif=exif.tobytes())
    polyglot = photo + b"<html><script>alert(1)</script></html>PK\x03\x04"
    kept = sniff(polyglot, "holiday.jpg")
    assert (kept.width, kept.height) == (40, 80)
    stored = Image.open(io.BytesIO(kept.data))
    assert not stored.getexif() and b"<script>" not in kept.data and b"PK\x03\x04" not in kept.data
    png = io.BytesIO()
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "secret author notes")
    Image.new("RGBA", (10, 10)).save(png, format="PNG", pnginfo=info)
    assert b"secret author notes" not in sniff(png.getvalue(), "a.png").data


def test_an_animation_keeps_its_first_frame_and_transparency_stays_png():
    frames = [Image.new("RGBA", (20, 20), color) for color in ("red", "blue")]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:])
    kept = sniff(out.getvalue(), "anim.gif")
    assert kept.media_type == "image/png"
    assert getattr(Image.open(io.BytesIO(kept.data)), "n_frames", 1) == 1


def test_a_big_photo_is_scaled_to_the_long_edge_and_under_the_per_image_limit():
    noisy = Image.effect_noise((2400, 1800), 80).convert("RGB")  # as PNG: ~12 MB
    out = io.BytesIO()
    noisy.save(out, format="PNG")
    kept = sniff(out.getvalue(), "scan.png")
    assert max(kept.width, kept.height) <= MAX_EDGE and len(kept.data) <= MAX_STORED_IMAGE_BYTES


@pytest.mark.parametrize(
    ("data", "name", "says"),
    [
        (b"", "empty.png", "is empty"),
        (b"\xef\xbb\xbf", "bom-only.txt", "is empty"),
        (b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', "x.svg",
         "export it as PNG"),
        (b'<?xml version="1.0"?>\n<svg onload="alert(1)"/>', "innocent.png", "export it as PNG"),
        (b"MZ\x90\x00" + bytes(200), "setup.exe", "not a file Parley can attach"),
        (b"\xff\xfe\x00h\x00i", "notes.txt", "not UTF-8"),
        (b"abc\x00def", "notes.txt", "binary data"),
        (b"%PDF-1.7\n garbage", "broken.pdf", "not a readable PDF"),
        (image_bytes("PNG", size=(13_000, 2)), "strip.png", "13000 by 2 pixels"),
        (image_bytes("PNG")[:60], "cut.png", "damaged"),
    ],
    ids=["empty", "bom-only", "svg", "svg-named-png", "exe", "utf16", "nul", "bad-pdf", "too-wide",
         "cut"],
)  # fmt: skip
def test_what_cannot_be_attached_is_refused_with_a_reason(data, name, says):
    with pytest.raises(Refused, match=says):
        sniff(data, name)


def test_a_decompression_bomb_is_refused_before_it_is_decoded():
    # A PNG whose header claims 30000 by 30000 pixels (900 MP, more than twice Pillow's own
    # guard) and holds none of them.
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", 30_000, 30_000, 8, 2, 0, 0, 0)
    bomb = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")
    with pytest.raises(Refused, match="more pixels than any photo"):
        sniff(bomb, "bomb.png")


def test_a_pdf_is_kept_as_sent_with_its_pages_and_its_text_read_for_stand_ins():
    pdf = text_pdf("First page words", "Second page words")
    kept = sniff(pdf, "report")
    assert (kept.kind, kept.media_type, kept.pages, kept.data) == ("pdf", "application/pdf", 2, pdf)
    text = pdf_text(pdf)
    assert "[page 1]\nFirst page words" in text and "[page 2]\nSecond page words" in text


def test_a_password_protected_pdf_is_refused():
    writer = PdfWriter()
    writer.add_blank_page(width=100, height=100)
    writer.encrypt("hunter2")
    out = io.BytesIO()
    writer.write(out)
    with pytest.raises(Refused, match="password-protected"):
        sniff(out.getvalue(), "locked.pdf")


def test_text_files_are_kept_as_utf8_with_a_type_from_their_name():
    kept = sniff("\ufeffname,city\nAda,Zürich\n".encode(), "people.csv")
    assert (kept.kind, kept.media_type, kept.data.decode()) == (
        "text", "text/csv", "name,city\nAda,Zürich\n"
    )  # fmt: skip
    assert sniff(b"<h1>hi</h1>", "page.html").media_type == "text/plain"  # never served as HTML
