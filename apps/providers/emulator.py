"""A loopback emulator of the Anthropic, OpenAI and Gemini streaming APIs, for tests and benches.

The official SDKs talk to it exactly as to the real services (see TECH_NOTES §1-4, §8). Each
request is answered from a script: the first queued `Script` whose `match` occurs in the
request body (or the default reply). Requests, and connections the client closed early, are
recorded for inspection. Anthropic prompt caching is accounted: one entry per exact prefix
ending at a `cache_control` breakpoint, read back through a 20-block lookback, above a minimum
length, with a TTL refreshed on hit, usable once the writing response has begun.

Run it alone with `python -m apps.providers.emulator --port 8900`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TOKEN = re.compile(r"\s*\S{1,4}|\s+")
LOOKBACK_BLOCKS = 20


@dataclass
class Script:
    """What the emulator does with one request."""

    text: str | list[str] = "Hello from the emulator."  # a list: several text blocks
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"name", "arguments"}
    stop: str = "end"  # "end" | "max_tokens"
    ttft_ms: int = 0
    tokens_per_second: float = 0  # 0: as fast as possible
    status: int = 200  # an HTTP error status instead of a stream
    error_type: str = ""
    retry_after: float | None = None
    error_after_chars: int | None = None  # an error event mid-stream after this much text
    usage: dict[str, int] = field(default_factory=dict)  # overrides, e.g. {"cached_tokens": 9}
    match: str = ""
    provider: str = ""  # "", "anthropic", "openai" or "gemini"


@dataclass
class RecordedRequest:
    provider: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    started: float
    first_byte: float | None = None
    ended: float | None = None
    closed_early: bool = False
    usage: dict[str, int] = field(default_factory=dict)


@dataclass
class CacheEntry:
    tokens: int
    expires: float
    usable: bool = False


class ClientGone(Exception):
    pass


def estimate_tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, sort_keys=True)) // 4)


class Emulator:
    def __init__(self, *, min_cache_tokens: int = 1024, cache_ttl: float = 300.0):
        self.scripts: list[Script] = []
        self.requests: list[RecordedRequest] = []
        self.invalid_keys = {"bad-key"}
        self.min_cache_tokens = min_cache_tokens
        self.cache_ttl = cache_ttl
        self.cache: dict[str, CacheEntry] = {}
        self.models = {
            "anthropic": ["claude-sonnet-5", "claude-haiku-4-5"],
            "openai": ["gpt-4.1", "gpt-4.1-mini"],
            "gemini": ["gemini-2.5-flash", "gemini-2.5-pro"],
        }
        self._lock = threading.Lock()
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    # --- control --------------------------------------------------------------------------

    def script(self, *scripts: Script) -> None:
        with self._lock:
            self.scripts.extend(scripts)

    def reset(self) -> None:
        with self._lock:
            self.scripts.clear()
            self.requests.clear()
            self.cache.clear()

    def _take_script(self, provider: str, raw_body: str) -> Script:
        with self._lock:
            for index, script in enumerate(self.scripts):
                if script.provider in ("", provider) and script.match in raw_body:
                    return self.scripts.pop(index)
        return Script()

    # --- Anthropic prompt cache -----------------------------------------------------------

    def _anthropic_blocks(self, body: dict[str, Any]) -> list[tuple[Any, bool]]:
        """Every cacheable block in prefix order (tools → system → messages), with its flag."""
        blocks: list[tuple[Any, bool]] = []
        for tool in body.get("tools") or []:
            blocks.append((tool, "cache_control" in tool))
        system = body.get("system") or []
        if isinstance(system, str):
            system = [{"type": "text", "text": system}]
        for block in system:
            blocks.append((block, "cache_control" in block))
        for message in body.get("messages") or []:
            content = message["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            for block in content:
                blocks.append(({"role": message["role"], **block}, "cache_control" in block))
        return blocks

    def anthropic_usage(self, body: dict[str, Any]) -> tuple[dict[str, int], list[str]]:
        """Usage for a request and the cache keys it writes (made usable once it streams)."""
        blocks = self._anthropic_blocks(body)
        model = body.get("model", "")
        running, digest = 0, hashlib.sha256(model.encode())
        prefix_tokens, prefix_keys = [], []
        for block, _ in blocks:
            clean = {k: v for k, v in block.items() if k != "cache_control"}
            digest.update(json.dumps(clean, sort_keys=True).encode())
            running += estimate_tokens(clean)
            prefix_tokens.append(running)
            prefix_keys.append(digest.copy().hexdigest())
        total = running
        now = time.monotonic()
        read = 0
        breakpoints = [i for i, (_, flagged) in enumerate(blocks) if flagged]
        with self._lock:
            for point in breakpoints:
                for index in range(point, max(-1, point - LOOKBACK_BLOCKS), -1):
                    entry = self.cache.get(prefix_keys[index])
                    if entry and entry.usable and entry.expires > now:
                        entry.expires = now + self.cache_ttl  # refreshed on hit
                        read = max(read, prefix_tokens[index])
                        break
            written, new_keys = 0, []
            for point in breakpoints:
                key = prefix_keys[point]
                if prefix_tokens[point] < self.min_cache_tokens or prefix_tokens[point] <= read:
                    continue
                if key not in self.cache or self.cache[key].expires <= now:
                    self.cache[key] = CacheEntry(prefix_tokens[point], now + self.cache_ttl)
                    new_keys.append(key)
                written = max(written, prefix_tokens[point] - read)
        usage = {
            "input_tokens": total - read - written,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }
        return usage, new_keys

    def _activate(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                if key in self.cache:
                    self.cache[key].usable = True

    # --- shared streaming helpers ---------------------------------------------------------

    @staticmethod
    def _key(request: web.Request) -> str:
        auth = request.headers.get("authorization", "")
        return (
            request.headers.get("x-api-key")
            or request.headers.get("x-goog-api-key")
            or request.query.get("key")
            or auth.removeprefix("Bearer ").strip()
        )

    async def _start(
        self, request: web.Request, record: RecordedRequest, script: Script
    ) -> web.StreamResponse:
        if script.ttft_ms:  # the model "thinks" before the response begins
            await asyncio.sleep(script.ttft_ms / 1000)
        response = web.StreamResponse(
            headers={"content-type": "text/event-stream", "request-id": f"req_{uuid.uuid4().hex}"}
        )
        await response.prepare(request)
        record.first_byte = time.monotonic()
        return response

    @staticmethod
    async def _write(response: web.StreamResponse, frame: str) -> None:
        try:
            await response.write(frame.encode())
        except (ConnectionResetError, RuntimeError) as exc:
            raise ClientGone from exc

    @staticmethod
    def _tokens(text: str) -> list[str]:
        return TOKEN.findall(text)

    async def _pace(self, script: Script, index: int, started: float) -> None:
        if script.tokens_per_second:
            delay = started + index / script.tokens_per_second - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)

    def _record(self, provider: str, request: web.Request, body: dict) -> RecordedRequest:
        record = RecordedRequest(
            provider=provider,
            path=request.path_qs,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
            started=time.monotonic(),
        )
        with self._lock:
            self.requests.append(record)
        return record

    @staticmethod
    def _texts(script: Script) -> list[str]:
        texts = [script.text] if isinstance(script.text, str) else list(script.text)
        return [text for text in texts if text]

    async def _serve(self, provider: str, request: web.Request, handler) -> web.StreamResponse:
        raw = await request.text()
        body = json.loads(raw or "{}")
        record = self._record(provider, request, body)
        script = self._take_script(provider, raw)
        try:
            if self._key(request) in self.invalid_keys:
                return self._error_response(
                    provider, 401, "authentication_error", "invalid x-api-key"
                )
            if script.status != 200:
                return self._error_response(
                    provider,
                    script.status,
                    script.error_type,
                    "scripted failure",
                    script.retry_after,
                )
            return await handler(request, body, script, record)
        except (ClientGone, asyncio.CancelledError):
            record.closed_early = True
            raise
        finally:
            record.ended = time.monotonic()

    def _error_response(
        self, provider: str, status: int, error_type: str, message: str, retry_after=None
    ) -> web.Response:
        headers = {}
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
        if provider == "anthropic":
            payload: dict[str, Any] = {
                "type": "error",
                "error": {"type": error_type or "api_error", "message": message},
            }
        elif provider == "openai":
            payload = {
                "error": {"message": message, "type": error_type or "server_error", "code": None}
            }
        else:
            payload = {
                "error": {"code": status, "message": message, "status": error_type or "INTERNAL"}
            }
        return web.json_response(payload, status=status, headers=headers)

    # --- Anthropic -------------------------------------------------------------------------

    async def anthropic_messages(self, request: web.Request) -> web.StreamResponse:
        return await self._serve("anthropic", request, self._anthropic_stream)

    async def _anthropic_stream(self, request, body, script: Script, record) -> web.StreamResponse:
        usage, new_keys = self.anthropic_usage(body)
        usage = {**usage, **{k: v for k, v in script.usage.items() if k in usage}}
        record.usage = usage
        response = await self._start(request, record, script)
        self._activate(new_keys)  # the writing response has begun

        async def event(kind: str, data: dict) -> None:
            await self._write(
                response, f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"
            )

        message_id = f"msg_{uuid.uuid4().hex[:16]}"
        await event(
            "message_start",
            {
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", ""),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**usage, "output_tokens": 1},
                }
            },
        )
        await event("ping", {})
        output, shown, index, started = 0, 0, 0, time.monotonic()
        for block_text in self._texts(script):
            await event(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": ""}},
            )
            for token in self._tokens(block_text):
                if script.error_after_chars is not None and shown >= script.error_after_chars:
                    await event(
                        "error",
                        {
                            "error": {
                                "type": script.error_type or "overloaded_error",
                                "message": "Overloaded",
                            }
                        },
                    )
                    return response
                await self._pace(script, output, started)
                await event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "text_delta", "text": token}},
                )
                output += 1
                shown += len(token)
            await event("content_block_stop", {"index": index})
            index += 1
        for call in script.tool_calls:
            payload = json.dumps(call.get("arguments", {}))
            await event(
                "content_block_start",
                {
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:12]}",
                        "name": call["name"],
                        "input": {},
                    },
                },
            )
            for start in range(0, len(payload), 7):  # split the JSON anywhere
                await event(
                    "content_block_delta",
                    {
                        "index": index,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": payload[start : start + 7],
                        },
                    },
                )
            await event("content_block_stop", {"index": index})
            index += 1
            output += 5
        stop = (
            "tool_use"
            if script.tool_calls
            else ("max_tokens" if script.stop == "max_tokens" else "end_turn")
        )
        await event(
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output},
            },
        )
        await event("message_stop", {})
        return response

    # --- OpenAI ----------------------------------------------------------------------------

    async def openai_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve("openai", request, self._openai_stream)

    async def _openai_stream(self, request, body, script: Script, record) -> web.StreamResponse:
        response = await self._start(request, record, script)
        chunk_id, model = f"chatcmpl-{uuid.uuid4().hex[:12]}", body.get("model", "")

        async def chunk(choices: list, usage=None) -> None:
            data = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": choices,
            }
            if usage is not None or body.get("stream_options", {}).get("include_usage"):
                data["usage"] = usage
            await self._write(response, f"data: {json.dumps(data)}\n\n")

        await chunk(
            [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]
        )
        output, shown, started = 0, 0, time.monotonic()
        for token in self._tokens("".join(self._texts(script))):
            if script.error_after_chars is not None and shown >= script.error_after_chars:
                error = {
                    "error": {
                        "message": "The server had an error",
                        "type": script.error_type or "server_error",
                    }
                }
                await self._write(response, f"data: {json.dumps(error)}\n\n")
                return response
            await self._pace(script, output, started)
            await chunk([{"index": 0, "delta": {"content": token}, "finish_reason": None}])
            output += 1
            shown += len(token)
        for position, call in enumerate(script.tool_calls):
            payload = json.dumps(call.get("arguments", {}))
            await chunk(
                [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": position,
                                    "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                                    "type": "function",
                                    "function": {"name": call["name"], "arguments": ""},
                                }
                            ]
                        },
                        "finish_reason": None,
                    }
                ]
            )
            for start in range(0, len(payload), 7):
                await chunk(
                    [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": position,
                                        "function": {"arguments": payload[start : start + 7]},
                                    }
                                ]
                            },
                            "finish_reason": None,
                        }
                    ]
                )
        finish = (
            "tool_calls"
            if script.tool_calls
            else ("length" if script.stop == "max_tokens" else "stop")
        )
        await chunk([{"index": 0, "delta": {}, "finish_reason": finish}])
        if body.get("stream_options", {}).get("include_usage"):
            prompt = estimate_tokens(body.get("messages", []))
            cached = script.usage.get("cached_tokens", 0)
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": output,
                "total_tokens": prompt + output,
                "prompt_tokens_details": {"cached_tokens": cached},
            }
            record.usage = {"input_tokens": prompt, "cached_tokens": cached}
            await chunk([], usage=usage)
        await self._write(response, "data: [DONE]\n\n")
        return response

    # --- Gemini ----------------------------------------------------------------------------

    async def gemini_generate(self, request: web.Request) -> web.StreamResponse:
        if not request.match_info["action"].endswith(":streamGenerateContent"):
            raise web.HTTPNotFound()
        return await self._serve("gemini", request, self._gemini_stream)

    async def _gemini_stream(self, request, body, script: Script, record) -> web.StreamResponse:
        response = await self._start(request, record, script)
        prompt = estimate_tokens(body.get("contents", []))
        cached = script.usage.get("cached_tokens", 0)

        async def chunk(parts: list, finish: str | None = None, usage: dict | None = None) -> None:
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
            if finish:
                candidate["finishReason"] = finish
            data: dict[str, Any] = {
                "candidates": [candidate],
                "responseId": "r1",
                "modelVersion": "emulated",
            }
            if usage:
                data["usageMetadata"] = usage
            await self._write(response, f"data: {json.dumps(data)}\r\n\r\n")

        output, shown, started = 0, 0, time.monotonic()
        for token in self._tokens("".join(self._texts(script))):
            if script.error_after_chars is not None and shown >= script.error_after_chars:
                error = {
                    "error": {
                        "code": 503,
                        "message": "The model is overloaded.",
                        "status": script.error_type or "UNAVAILABLE",
                    }
                }
                await self._write(response, f"data: {json.dumps(error)}\r\n\r\n")
                return response
            await self._pace(script, output, started)
            await chunk([{"text": token}])
            output += 1
            shown += len(token)
        parts = [
            {"functionCall": {"name": c["name"], "args": c.get("arguments", {})}}
            for c in script.tool_calls
        ]
        usage = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": output,
            "totalTokenCount": prompt + output,
            "cachedContentTokenCount": cached,
        }
        record.usage = {"input_tokens": prompt, "cached_tokens": cached}
        await chunk(
            parts or [{"text": ""}], "MAX_TOKENS" if script.stop == "max_tokens" else "STOP", usage
        )
        return response

    # --- models ----------------------------------------------------------------------------

    async def list_models(self, request: web.Request) -> web.Response:
        if self._key(request) in self.invalid_keys:
            kind = (
                "gemini"
                if "x-goog-api-key" in request.headers
                else ("anthropic" if "anthropic-version" in request.headers else "openai")
            )
            return self._error_response(kind, 401, "authentication_error", "invalid API key")
        if "x-goog-api-key" in request.headers or request.path.startswith("/v1beta"):
            return web.json_response(
                {
                    "models": [
                        {"name": f"models/{m}", "displayName": m} for m in self.models["gemini"]
                    ]
                }
            )
        if "anthropic-version" in request.headers:
            data = [
                {"type": "model", "id": m, "display_name": m, "created_at": "2026-01-01T00:00:00Z"}
                for m in self.models["anthropic"]
            ]
            return web.json_response(
                {
                    "data": data,
                    "has_more": False,
                    "first_id": data[0]["id"],
                    "last_id": data[-1]["id"],
                }
            )
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "emulator"}
                    for m in self.models["openai"]
                ],
            }
        )

    # --- app and lifecycle -----------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self.anthropic_messages)
        app.router.add_post("/v1/chat/completions", self.openai_chat)
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_get("/v1beta/models", self.list_models)
        app.router.add_post(r"/{version:v1|v1beta}/models/{action}", self.gemini_generate)
        return app

    def start_in_thread(self, port: int = 0) -> Emulator:
        """Serve on 127.0.0.1 from a background thread (for tests); returns when listening."""
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._runner = web.AppRunner(self.app(), access_log=None)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", port)
            self._loop.run_until_complete(site.start())
            bound = self._runner.addresses[0][1]
            self.url = f"http://127.0.0.1:{bound}"
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=run, name="provider-emulator", daemon=True).start()
        if not ready.wait(10):
            raise RuntimeError("The provider emulator did not start.")
        return self

    def stop(self) -> None:
        if self._loop and self._runner:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)


def main() -> None:
    parser = argparse.ArgumentParser(description="Loopback emulator of LLM provider APIs.")
    parser.add_argument("--port", type=int, default=8900)
    args = parser.parse_args()
    web.run_app(Emulator().app(), host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
