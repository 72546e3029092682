"""A model of what one browser tab shows, built only from the websocket frames it receives."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

ARTICLE = re.compile(
    r'<article id="msg-(?P<id>[0-9a-f-]{36})"(?P<attrs>.*?)>(?P<body>.*?)</article>', re.S
)
STREAM_TEXT = re.compile(
    r'<div class="msg-body stream-text" id="msg-[0-9a-f-]{36}-text">(.*?)</div>', re.S
)
DELTA = re.compile(
    r'<span id="msg-(?P<id>[0-9a-f-]{36})-text" hx-swap-oob="beforeend">(?P<text>.*?)</span>', re.S
)
STATUS = re.compile(r'data-status="(\w+)"')


@dataclass
class Bubble:
    status: str
    text: str = ""  # the raw text while streaming; empty once rendered as Markdown
    html: str = ""  # the bubble's last full markup


@dataclass
class Tab:
    bubbles: dict[str, Bubble] = field(default_factory=dict)
    deltas: list[tuple[str, str]] = field(default_factory=list)
    snapshots: list[tuple[str, str]] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)
    # The page held no bubbles before the socket's frames (as htmx treats it: a replacement
    # or text for a bubble not on the page goes nowhere). Off, the model takes them as
    # standing for bubbles the page was rendered with.
    page_is_empty: bool = False

    def apply(self, frame: str) -> None:
        """Apply a frame's fragments in document order, as htmx does."""
        self.frames.append(frame)
        fragments = sorted(
            [*DELTA.finditer(frame), *ARTICLE.finditer(frame)], key=lambda match: match.start()
        )
        for match in fragments:
            if match.re is DELTA:
                message_id, text = match["id"], html.unescape(match["text"])
                if self.page_is_empty and message_id not in self.bubbles:
                    continue  # htmx drops text for a bubble that is not on the page
                self.deltas.append((message_id, text))
                self.bubbles[message_id].text += text
                continue
            if 'hx-swap-oob="delete"' in match["attrs"]:  # a waiting bubble that went away
                self.bubbles.pop(match["id"], None)
                continue
            if (
                self.page_is_empty
                and 'hx-swap-oob="true"' in match["attrs"]
                and match["id"] not in self.bubbles
            ):
                continue  # htmx drops a replacement whose bubble is not on the page
            status = STATUS.search(match["attrs"])[1]
            stream = STREAM_TEXT.search(match["body"])
            text = html.unescape(stream[1]) if stream else ""
            if stream and "hx-swap-oob" in match["attrs"]:
                self.snapshots.append((match["id"], text))
            self.bubbles[match["id"]] = Bubble(status=status, text=text, html=match[0])

    @property
    def synced(self) -> bool:
        """The server has sent everything the tab lacked when it (re)connected."""
        return any('id="sync-state"' in frame for frame in self.frames)

    def status(self, message_id: str) -> str | None:
        bubble = self.bubbles.get(message_id)
        return bubble.status if bubble else None

    def bubble_html(self, message_id: str) -> str | None:
        bubble = self.bubbles.get(message_id)
        return bubble.html if bubble else None

    def delta_text(self, message_id: str) -> str:
        return "".join(text for mid, text in self.deltas if mid == message_id)
