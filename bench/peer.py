"""Open WebUI as a third server beside Parley and the floor (`--open-webui PATH`): the peer
issue 36 sets its targets against, started from an install of its own (it is not one of
Parley's dependencies: `python -m venv V && V/bin/pip install open-webui`, then pass
`V/bin/open-webui`), offline, against the same upstream.

A client streams a reply as Open WebUI's browser page does (its socket.io protocol spoken
directly over a websocket): a tab's socket, a chat, the completion request, its events, and
the two requests the page sends once the reply is done. As its page does by default, the
first message of a chat asks for a title, tags and follow-up questions (three more model
calls, answered by the emulator's short default reply); `--open-webui-light` turns them off.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import aiohttp

from bench.procs import pids_under
from bench.servers import free_port, wait_serving


class OpenWebUI:
    name = "Open WebUI"
    credentials = None

    def __init__(self, workdir: Path, upstream: str, executable: Path, *, tasks: bool) -> None:
        self.tasks = tasks
        self.model_calls = 4 if tasks else 1  # the reply, then a title, tags and follow-ups
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = workdir / "open-webui"
        self.workdir.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "PARLEY"))}
        env.update(
            DATA_DIR=str(self.workdir), OFFLINE_MODE="true", HF_HUB_OFFLINE="1",
            RAG_EMBEDDING_MODEL_AUTO_UPDATE="false", ENABLE_OLLAMA_API="false",
            OPENAI_API_BASE_URL=upstream, OPENAI_API_KEY="bench",
            WEBUI_SECRET_KEY=uuid.uuid4().hex, ENABLE_VERSION_UPDATE_CHECK="false",
            GLOBAL_LOG_LEVEL="WARNING", PORT=str(self.port),
        )  # fmt: skip
        self.log = (self.workdir / "serve.log").open("w+")
        self.process = subprocess.Popen(
            [str(executable), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=self.workdir, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.token = ""
        self.model = ""

    def output(self) -> str:
        return (self.workdir / "serve.log").read_text()

    def pids(self) -> list[int]:
        return [self.process.pid, *pids_under(self.process.pid)]

    def threads(self, count: int) -> list[str]:
        return [str(uuid.uuid4()) for _ in range(count)]

    async def wait_ready(self) -> None:
        await wait_serving(self, "/health", seconds=300)  # its first start builds caches
        async with aiohttp.ClientSession() as http:
            account = {"name": "Bench", "email": "bench@example.com", "password": "bench-pass"}
            async with http.post(f"{self.url}/api/v1/auths/signup", json=account) as response:
                if response.status != 200:
                    raise RuntimeError(f"Open WebUI signup: {response.status}")
                self.token = (await response.json())["token"]
            headers = {"Authorization": f"Bearer {self.token}"}
            async with http.get(f"{self.url}/api/models", headers=headers) as response:
                self.model = (await response.json())["data"][0]["id"]

    async def stream_reply(self, http, stream, start: asyncio.Event) -> None:
        """One reply as Open WebUI's page gets it: a socket.io connection for the tab, a chat
        made beforehand (as Parley's threads are), then at `start` the completion request,
        whose events arrive on the socket; when it is done, the two requests the page sends
        after every reply (`/api/chat/completed`, then the chat saved)."""
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            async with http.ws_connect(
                self.url.replace("http", "ws") + "/ws/socket.io/?EIO=4&transport=websocket",
                max_msg_size=0,
            ) as socket:  # fmt: skip
                await socket.receive_str()  # Engine.IO's open packet
                await socket.send_str("40" + json.dumps({"token": self.token}))
                session_id = json.loads((await socket.receive_str())[2:])["sid"]
                chat = {"title": stream.prompt, "models": [self.model], "messages": [],
                        "history": {"messages": {}, "currentId": None}}  # fmt: skip
                async with http.post(f"{self.url}/api/v1/chats/new", json={"chat": chat},
                                     headers=headers) as response:  # fmt: skip
                    made = await response.json()
                if "id" not in made:
                    stream.status = f"new chat {response.status}: {str(made)[:80]}"
                    return
                await start.wait()
                await self._stream_reply(http, socket, stream, headers, chat, made["id"],
                                         session_id)  # fmt: skip
        except (aiohttp.ClientError, ValueError, KeyError, TypeError) as exc:
            stream.status = f"{type(exc).__name__}: {exc}"

    async def _stream_reply(self, http, socket, stream, headers, chat, chat_id, session_id):
        user_id, reply_id = str(uuid.uuid4()), str(uuid.uuid4())
        messages = [{"role": "user", "content": stream.prompt}]
        body = {
            "model": self.model, "stream": True, "messages": messages, "chat_id": chat_id,
            "id": reply_id, "parent_id": user_id, "session_id": session_id,
            # What its page asks for with a chat's first message, unless a person has turned
            # them off in their settings: each is one more request to the model.
            "background_tasks": {"title_generation": self.tasks, "tags_generation": self.tasks,
                                 "follow_up_generation": self.tasks},
        }  # fmt: skip
        stream.posted_at = time.monotonic()
        async with http.post(f"{self.url}/api/chat/completions", json=body,
                             headers=headers) as response:  # fmt: skip
            answer = await response.read()
            stream.answered_at = time.monotonic()
            if response.status != 200:
                stream.status = f"POST {response.status}: {answer[:80].decode(errors='replace')}"
                return
        while True:
            packet = await socket.receive_str()
            if packet == "2":  # Engine.IO's ping
                await socket.send_str("3")
                continue
            if not packet.startswith("42"):
                continue
            name, event = json.loads(packet[2:])
            if name != "events" or event.get("chat_id") != chat_id:
                continue
            data = event["data"]
            inner = data.get("data") or {}
            if data["type"] == "response:completion" and inner.get("type", "").endswith(
                "output_text.delta"
            ):
                if stream.first_delta_at is None:
                    stream.first_delta_at = time.monotonic()
                stream.text += inner["delta"]
                stream.arrivals.append((time.monotonic(), len(stream.text)))
            elif data["type"] == "chat:completion" and inner.get("done"):
                stream.settled_at = time.monotonic()
                stream.status = "error" if inner.get("error") else "done"
                break
        # What the page sends once a reply is done: the outlet filters, then the chat saved.
        answer = {"role": "assistant", "content": stream.text, "id": reply_id}
        done = {"model": self.model, "messages": [*messages, answer], "chat_id": chat_id,
                "session_id": session_id, "id": reply_id}  # fmt: skip
        async with http.post(f"{self.url}/api/chat/completed", json=done,
                             headers=headers) as response:  # fmt: skip
            await response.read()
        chat = {**chat, "messages": done["messages"]}
        async with http.post(f"{self.url}/api/v1/chats/{chat_id}", json={"chat": chat},
                             headers=headers) as response:  # fmt: skip
            await response.read()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
