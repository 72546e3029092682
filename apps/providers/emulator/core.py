"""The emulator's shared parts: scripts, recorded requests, pacing, errors and model lists.

Each protocol lives in its own module as a subclass of `EmulatorCore`; `Emulator` (in the
package) combines them and serves them on one port.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web

from apps.providers.emulator.media import REFUSALS, field_refusal, without_media

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
    chunk_chars: int = 0  # characters per streamed event; 0: word-like tokens of up to 4
    status: int = 200  # an HTTP error status instead of a stream
    error_type: str = ""
    retry_after: float | None = None
    error_after_chars: int | None = None  # an error event mid-stream after this much text
    # Silence mid-stream after this much text (OpenAI wire): the connection stays open, no
    # byte comes for `stall_seconds`, then the stream ends without its [DONE].
    stall_after_chars: int | None = None
    stall_seconds: float = 30.0
    usage: dict[str, int] = field(default_factory=dict)  # overrides, e.g. {"cached_tokens": 9}
    error_message: str = "scripted failure"  # "{key}" becomes the request's key, as some do
    # Stream only what follows the longest prefix of `text` the request already holds: a model
    # continuing its own cut-off answer.
    resumes: bool = False
    match: str = ""
    provider: str = ""  # "", "anthropic", "openai" or "gemini"
    compress: bool = False  # the stream gzip-encoded, as a proxy in front of a provider may


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
    # (when, characters of text written so far) after each text chunk: benchmarks time each
    # piece from the moment the upstream wrote it (OpenAI wire).
    text_written: list[tuple[float, int]] = field(default_factory=list)


@dataclass
class CacheEntry:
    tokens: int
    expires: float
    usable: bool = False
    ttl: float = 300.0


def _strings(value: Any) -> list[str]:
    """Every string inside a JSON body."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


class ClientGone(Exception):
    """The client hung up mid-stream (a stopped reply, a worker handing over): a provider
    just stops writing, so the emulator ends the response quietly."""

    def __init__(self, response: web.StreamResponse) -> None:
        super().__init__("the client hung up")
        self.response = response


def estimate_tokens(value: Any) -> int:
    stripped, media_tokens = without_media(value)
    return max(1, len(json.dumps(stripped, sort_keys=True)) // 4 + media_tokens)


class EmulatorCore:
    def __init__(self, *, min_cache_tokens: int = 1024, cache_ttl: float = 300.0):
        self.scripts: list[Script] = []
        self.requests: list[RecordedRequest] = []
        self.listings: list[RecordedRequest] = []  # model list requests, kept apart
        self.invalid_keys = {"bad-key"}
        self.azure_deployments = {"gpt-4o-prod"}  # Azure OpenAI deployments that exist
        # (model prefix, field) pairs refused with a 400, as some servers refuse a field the
        # OpenAI API takes ("" for every model): a preset's description says so too.
        self.refused_fields: list[tuple[str, str]] = []
        self.min_cache_tokens = min_cache_tokens
        self.cache_ttl = cache_ttl
        self.cache: dict[str, CacheEntry] = {}
        self.skipped = 0.0
        self.models = {
            "anthropic": ["claude-sonnet-5", "claude-haiku-4-5"],
            "openai": ["gpt-4.1", "gpt-4.1-mini"],
            "gemini": ["gemini-2.5-flash", "gemini-2.5-pro"],
        }
        # What a listed model reads ("image", "file"), where its list says: Anthropic's list
        # always does (as `capabilities`); an OpenAI-compatible list does for the models named
        # here, in OpenRouter's shape (`architecture.input_modalities`); OpenAI's never does.
        self.input_modalities: dict[str, list[str]] = {}
        # The embedding models it serves (`embeddings.py`), and the embedding requests made.
        self.embedding_models = {
            "text-embedding-3-small",
            "gemini-embedding-001",
            "nomic-embed-text",
        }
        self.embedding_requests: list[tuple[str, dict, float]] = []
        self._lock = threading.Lock()
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    # --- control --------------------------------------------------------------------------

    def now(self) -> float:
        """The cache's clock: real time, plus whatever `advance` skipped."""
        return time.monotonic() + self.skipped

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass for the cache (an idle pause in a benchmark, without waiting)."""
        with self._lock:
            self.skipped += seconds

    def script(self, *scripts: Script) -> None:
        with self._lock:
            self.scripts.extend(scripts)

    def reset(self) -> None:
        with self._lock:
            self.scripts.clear()
            self.requests.clear()
            self.listings.clear()
            self.cache.clear()
            self.input_modalities.clear()
            self.refused_fields.clear()
            self.embedding_requests.clear()

    def _take_script(self, provider: str, raw_body: str) -> Script:
        with self._lock:
            for index, script in enumerate(self.scripts):
                if script.provider in ("", provider) and script.match in raw_body:
                    return self.scripts.pop(index)
        return Script()

    # --- shared streaming helpers ---------------------------------------------------------

    @staticmethod
    def _key(request: web.Request) -> str:
        auth = request.headers.get("authorization", "")
        return (
            request.headers.get("x-api-key")
            or request.headers.get("x-goog-api-key")
            or request.headers.get("api-key")  # Azure OpenAI
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
        if script.compress:
            response.enable_compression(web.ContentCoding.gzip)
        await response.prepare(request)
        record.first_byte = time.monotonic()
        return response

    @staticmethod
    async def _write(response: web.StreamResponse, frame: str) -> None:
        try:
            await response.write(frame.encode())
        except (ConnectionResetError, RuntimeError) as exc:
            raise ClientGone(response) from exc

    @staticmethod
    def _tokens(text: str, script: Script) -> list[str]:
        """The pieces a reply streams in: word-like tokens, or fixed-size chunks."""
        if script.chunk_chars:
            step = script.chunk_chars
            return [text[start : start + step] for start in range(0, len(text), step)]
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
        refusal = REFUSALS[provider](body) if provider in REFUSALS else None
        if refusal is None and provider == "openai":
            refusal = field_refusal(body, self.refused_fields)
        if refusal is not None:  # as the real API refuses a wrong part: no script is used
            record.ended = time.monotonic()
            return self._error_response(provider, *refusal)
        script = self._take_script(provider, raw)
        if script.resumes and isinstance(script.text, str):
            held = max(
                (s for s in _strings(body) if s and script.text.startswith(s)), key=len, default=""
            )
            script = replace(script, text=script.text[len(held) :])
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
                    script.error_message.replace("{key}", self._key(request)),
                    script.retry_after,
                )
            return await handler(request, body, script, record)
        except ClientGone as gone:
            record.closed_early = True
            return gone.response
        except asyncio.CancelledError:
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

    # --- models ----------------------------------------------------------------------------

    def _anthropic_capabilities(self, model: str) -> dict:
        """A model's `capabilities` as Anthropic's list gives them (every key present)."""
        reads = self.input_modalities.get(model, ["text", "image", "file"])
        supported = {"image_input": "image" in reads, "pdf_input": "file" in reads}
        flags = ("batch", "citations", "code_execution", "structured_outputs", "image_input",
                 "pdf_input")  # fmt: skip
        capabilities: dict = {name: {"supported": supported.get(name, True)} for name in flags}
        capabilities["context_management"] = {"supported": True}
        capabilities["effort"] = {"supported": False}
        capabilities["server_tools"] = {"supported": False}
        capabilities["thinking"] = {"supported": True}
        return capabilities

    async def list_models(self, request: web.Request) -> web.Response:
        with self._lock:
            self.listings.append(
                RecordedRequest(
                    provider="models", path=request.path_qs, body={},
                    headers={k.lower(): v for k, v in request.headers.items()},
                    started=time.monotonic(),
                )
            )  # fmt: skip
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
                {"type": "model", "id": m, "display_name": m, "created_at": "2026-01-01T00:00:00Z",
                 "lifecycle": "active", "capabilities": self._anthropic_capabilities(m)}
                for m in self.models["anthropic"]
            ]  # fmt: skip
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
                    | (
                        {"architecture": {"input_modalities": self.input_modalities[m]}}
                        if m in self.input_modalities
                        else {}
                    )
                    for m in self.models["openai"]
                ],
            }
        )
