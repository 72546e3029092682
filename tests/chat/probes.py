"""Checking that nothing reached a socket without waiting out a clock: push a probe on a topic
the socket follows and read until it arrives. The bus hands a topic's pushes out in order,
and a push on another topic that was handed out earlier was handed out before the probe, so
whatever would have reached the socket is in the frames read before the probe."""

from __future__ import annotations

import asyncio
import uuid

from apps.chat import livebus, livestate
from apps.chat.display import events


async def frames_before_probe(communicator, topic: str, timeout: float = 10) -> list[str]:
    """What the socket received before a probe pushed on `topic` now (its own frame aside)."""
    marker = f"probe-{uuid.uuid4().hex}"
    probe = f'<div id="{marker}" hx-swap-oob="true"></div>'
    await livebus.publish(livestate.async_client(), [(topic, events.html_event(probe))])
    frames: list[str] = []
    async with asyncio.timeout(timeout):
        while True:
            frame = await communicator.receive_from(timeout=timeout)
            if marker in frame:
                rest = frame.replace(probe, "").strip()
                return [*frames, rest] if rest else frames
            frames.append(frame)
