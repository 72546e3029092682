"""The API over HTTP (async), and a thread's live events followed across network blips."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from parley_cli.config import Config

RECONNECT_DELAYS = (0.5, 1, 2, 4, 8)


class ApiError(Exception):
    def __init__(self, status: int, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.field = status, detail, field


class Api:
    """Calls to `/api/v1/`; errors come back as ApiError with the server's reason."""

    def __init__(self, config: Config, *, transport: httpx.AsyncBaseTransport | None = None):
        self.config = config
        self.http = httpx.AsyncClient(
            base_url=f"{config.url}/api/v1",
            headers={"Authorization": f"Bearer {config.token}"},
            timeout=httpx.Timeout(30, read=60),
            transport=transport,
        )

    async def close(self) -> None:
        await self.http.aclose()

    async def call(self, method: str, path: str, **kwargs) -> Any:
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ApiError(0, f"Cannot reach Parley at {self.config.url}: {exc}") from None
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = {"detail": response.text[:200]}
            raise ApiError(response.status_code, body.get("detail", ""), body.get("field"))
        return response.json()

    async def sessions(self) -> list[dict]:
        return await self.call("GET", "/sessions")

    async def session(self, session_id: str) -> dict:
        return await self.call("GET", f"/sessions/{session_id}")

    async def threads(self, session_id: str) -> list[dict]:
        return await self.call("GET", f"/sessions/{session_id}/threads")

    async def thread(self, thread_id: str) -> dict:
        return await self.call("GET", f"/threads/{thread_id}")

    async def messages(self, thread_id: str, *, last: int = 60) -> list[dict]:
        """The thread's latest `last` messages, oldest first."""
        status = await self.thread(thread_id)
        after = max(0, status["latest_seq"] - last)
        page = await self.call(
            "GET", f"/threads/{thread_id}/messages", params={"after": after, "limit": 200}
        )
        return page["items"]

    async def post(self, thread_id: str, text: str, attachments: Sequence[str] = ()) -> dict:
        body = {"text": text, "attachments": list(attachments)}
        return await self.call("POST", f"/threads/{thread_id}/messages", json=body)

    async def attach(self, thread_id: str, paths: list[Path]) -> list[dict]:
        """Upload files to wait for the next message (all or none; Parley says why not)."""
        files = []
        for path in paths:
            try:
                files.append(("files", (path.name, path.read_bytes())))
            except OSError as exc:
                raise ApiError(0, f"Cannot read {path}: {exc.strerror or exc}", "files") from None
        return await self.call("POST", f"/threads/{thread_id}/attachments", files=files)

    async def stop(self, thread_id: str) -> dict:
        return await self.call("POST", f"/threads/{thread_id}/stop")

    async def find_session(self, name: str) -> dict:
        sessions = await self.sessions()
        exact = [s for s in sessions if s["name"] == name]
        loose = [s for s in sessions if s["name"].lower() == name.lower()]
        found = exact or loose
        if not found:
            names = ", ".join(s["name"] for s in sessions) or "none"
            raise ApiError(404, f"No session named {name!r} (yours: {names}).")
        return found[0]


@dataclass
class Reply:
    """A message as the stream last told it: its text, and for a live one its last delta."""

    data: dict
    text: str = ""
    seq: int = 0

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def status(self) -> str:
        return self.data["status"]


@dataclass
class ThreadState:
    """Every message of the thread the client has heard of, kept exact by the stream's rules:
    a snapshot or a message gives a reply's text so far and the number of its last delta;
    a delta applies only as the next number (a repeat is dropped, a gap waits for a fresh
    message event)."""

    messages: dict[str, Reply] = field(default_factory=dict)

    def know(self, data: dict, live: dict | None = None) -> Reply:
        reply = self.messages.get(data["id"])
        if reply is None:
            reply = self.messages[data["id"]] = Reply(data)
        reply.data = data
        if live is not None:
            reply.text, reply.seq = live["text"], live["seq"]
            if data["status"] == "queued" and live["seq"]:
                reply.data = {**data, "status": "streaming"}
        else:
            reply.text = data["text"]
        return reply

    def apply(self, kind: str, data: dict) -> Reply | None:
        """Take one event; the message it changed, if any."""
        if kind == "snapshot":
            for message in data["messages"]:
                self.know(message, data["live"].get(message["id"]))
            return None
        if kind == "message":
            return self.know(data, data.get("live"))
        if kind == "delta":
            reply = self.messages.get(data["message"])
            if reply is None or data["seq"] != reply.seq + 1:
                return None
            reply.text += data["text"]
            reply.seq = data["seq"]
            if reply.status == "queued":  # its text is arriving: it streams, whatever came first
                reply.data = {**reply.data, "status": "streaming"}
            return reply
        return None


async def follow(
    api: Api, thread_id: str, *, on_state=None
) -> AsyncGenerator[tuple[str, dict], None]:
    """A thread's live events, for as long as the caller reads them. A dropped connection is
    retried with backoff and resumed with Last-Event-ID, so nothing is missed or repeated.
    `on_state(text)` hears "connected", "reconnecting…" and the like."""
    last_id: str | None = None
    failures = 0
    while True:
        headers = {"Last-Event-ID": last_id} if last_id else {}
        try:
            async with api.http.stream(
                "GET", f"/threads/{thread_id}/events", headers=headers,
                timeout=httpx.Timeout(30, read=45),
            ) as response:  # fmt: skip
                if 400 <= response.status_code < 500:  # refused: retrying would not help
                    body = json.loads(await response.aread() or b"{}")
                    raise ApiError(response.status_code, body.get("detail", ""))
                if response.status_code >= 500:  # the server is restarting: try again
                    raise httpx.RemoteProtocolError(f"HTTP {response.status_code}")
                failures = 0
                if on_state:
                    on_state("connected")
                kind, data = "message", []
                async for line in response.aiter_lines():
                    if line.startswith("id:"):
                        last_id = line[3:].strip()
                    elif line.startswith("event:"):
                        kind = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].strip())
                    elif not line:
                        if data:
                            yield kind, json.loads("\n".join(data))
                        kind, data = "message", []
        except (httpx.TransportError, httpx.RemoteProtocolError):
            pass
        delay = RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)]
        failures += 1
        if on_state:
            on_state(f"reconnecting in {delay:g} s…")
        await asyncio.sleep(delay)
