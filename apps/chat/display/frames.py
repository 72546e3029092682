"""Websocket frames that daphne accepts: none over 1 MiB, whatever a reply or a sync holds.

Pushes and snapshots are lists of small, independent out-of-band fragments (a bubble, a piece
of a streaming bubble's text); they are packed into frames in order, each under
MAX_FRAME_BYTES. A single bubble too large for one frame never reaches this module as one
fragment: `bubbles.bubble_fragments` splits or stubs it first.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.utils.html import escape

# daphne (autobahn) refuses frames over 1 MiB; half of that leaves room for the wrapper.
MAX_FRAME_BYTES = 512 * 1024
# Escaping can turn one character into six bytes (`&quot;`); a piece of this many characters
# stays within a frame whatever it holds.
TEXT_PIECE_CHARS = MAX_FRAME_BYTES // 8


def size(fragment: str) -> int:
    return len(fragment.encode())


def text_pieces(text: str) -> list[str]:
    """A long text in pieces that each fit a frame once escaped."""
    step = TEXT_PIECE_CHARS
    return [text[start : start + step] for start in range(0, len(text), step)]


def appended_text(message_id: str, text: str) -> list[str]:
    """Fragments that append `text` to a streaming bubble, one piece per fragment."""
    return [
        f'<span id="msg-{message_id}-text" hx-swap-oob="beforeend">{escape(piece)}</span>'
        for piece in text_pieces(text)
    ]


def appended_to_transcript(html: str) -> str:
    return f'<div id="transcript" hx-swap-oob="beforeend">{html}</div>'


def pack(fragments: Iterable[str], *, appended: bool = False) -> list[str]:
    """Fragments in order, as few frames as fit; `appended` wraps each frame's bubbles for the
    end of the transcript."""
    frames: list[str] = []
    current: list[str] = []
    used = 0
    for fragment in fragments:
        fragment_size = size(fragment)
        if current and used + fragment_size > MAX_FRAME_BYTES:
            frames.append("".join(current))
            current, used = [], 0
        current.append(fragment)
        used += fragment_size
    if current:
        frames.append("".join(current))
    return [appended_to_transcript(frame) for frame in frames] if appended else frames
