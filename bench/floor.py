"""The floor: the simplest server that relays an upstream's stream to a websocket.

One process, one event loop: a composer POST starts the upstream request (OpenAI-compatible
SSE) and answers at once; each content delta is written to the thread's open websockets the
moment it is read, in the same markup Parley pushes, and a settled bubble follows `[DONE]`.
No database, no queue, no worker: what Parley adds on top of this is what it costs.

Run: `python -m bench.floor PORT UPSTREAM_URL` (bench/streaming.py starts it).
"""

from __future__ import annotations

import asyncio
import html
import json
import sys
import uuid

import aiohttp
from aiohttp import web

SOCKETS: dict[str, set[web.WebSocketResponse]] = {}
TASKS: set[asyncio.Task] = set()


async def socket(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(max_msg_size=0)
    await ws.prepare(request)
    thread = request.match_info["thread"]
    SOCKETS.setdefault(thread, set()).add(ws)
    try:
        async for message in ws:
            if message.type == aiohttp.WSMsgType.TEXT and '"sync"' in message.data:
                await ws.send_str('<div id="sync-state" data-synced="true"></div>')
    finally:
        SOCKETS[thread].discard(ws)
    return ws


async def broadcast(thread: str, frame: str) -> None:
    for ws in tuple(SOCKETS.get(thread, ())):
        await ws.send_str(frame)


async def relay(app: web.Application, thread: str, reply: str, text: str) -> None:
    body = {"model": "bench-model", "stream": True,
            "messages": [{"role": "user", "content": text}]}  # fmt: skip
    url = app["upstream"] + "/chat/completions"
    reply_text = []
    async with app["http"].post(url, json=body, headers={"Authorization": "Bearer bench"}) as up:
        async for line in up.content:
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            for choice in json.loads(line[6:]).get("choices", ()):
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    reply_text.append(piece)
                    await broadcast(
                        thread,
                        f'<span id="msg-{reply}-text" hx-swap-oob="beforeend">'
                        f"{html.escape(piece)}</span>",
                    )
    await broadcast(
        thread,
        f'<article id="msg-{reply}" data-status="done"><p>{html.escape("".join(reply_text))}'
        "</p></article>",
    )


async def post(request: web.Request) -> web.Response:
    thread, form = request.match_info["thread"], await request.post()
    reply = str(uuid.uuid4())
    task = asyncio.create_task(relay(request.app, thread, reply, str(form.get("text", ""))))
    TASKS.add(task)
    task.add_done_callback(TASKS.discard)
    return web.Response(
        text=f'<article id="msg-{reply}" data-status="queued"></article>', content_type="text/html"
    )


async def start_client(app: web.Application):
    app["http"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    yield
    await app["http"].close()


def main() -> None:
    port, upstream = int(sys.argv[1]), sys.argv[2].rstrip("/")
    app = web.Application()
    app["upstream"] = upstream
    app.cleanup_ctx.append(start_client)
    app.router.add_get("/ws/threads/{thread}/", socket)
    app.router.add_post("/t/{thread}/messages/", post)
    app.router.add_get("/login/", lambda request: web.Response(text="floor"))
    web.run_app(app, host="127.0.0.1", port=port, print=None)


if __name__ == "__main__":
    main()
