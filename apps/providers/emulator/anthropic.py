"""The emulator's Anthropic Messages API (SSE) with prompt-cache accounting."""

from __future__ import annotations

import hashlib
import itertools
import json
import time
import uuid
from typing import Any

from aiohttp import web

from apps.providers.emulator.core import (
    LOOKBACK_BLOCKS,
    CacheEntry,
    EmulatorCore,
    Script,
    estimate_tokens,
)


class AnthropicProtocol(EmulatorCore):
    """Messages streamed as SSE events; cache reads and writes counted per exact prefix."""

    # --- Anthropic prompt cache -----------------------------------------------------------

    def _anthropic_blocks(self, body: dict[str, Any]) -> list[tuple[Any, float | None]]:
        """Every cacheable block in prefix order (tools → system → messages), with the TTL of
        its breakpoint in seconds (None: not a breakpoint)."""
        blocks: list[tuple[Any, float | None]] = []
        for tool in body.get("tools") or []:
            blocks.append((tool, self._ttl(tool)))
        system = body.get("system") or []
        if isinstance(system, str):
            system = [{"type": "text", "text": system}]
        for block in system:
            blocks.append((block, self._ttl(block)))
        for message in body.get("messages") or []:
            content = message["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            for block in content:
                blocks.append(({"role": message["role"], **block}, self._ttl(block)))
        return blocks

    def _ttl(self, block: dict[str, Any]) -> float | None:
        control = block.get("cache_control")
        if not control:
            return None
        return self.cache_ttl * (12 if control.get("ttl") == "1h" else 1)

    def anthropic_usage(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
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
        now = self.now()
        read = 0
        breakpoints = [(i, ttl) for i, (_, ttl) in enumerate(blocks) if ttl is not None]
        with self._lock:
            for point, _ in breakpoints:
                for index in range(point, max(-1, point - LOOKBACK_BLOCKS), -1):
                    entry = self.cache.get(prefix_keys[index])
                    if entry and entry.usable and entry.expires > now:
                        entry.expires = now + entry.ttl  # refreshed on hit, for its own TTL
                        read = max(read, prefix_tokens[index])
                        break
            written = written_long = 0
            new_keys = []
            for point, ttl in breakpoints:
                key = prefix_keys[point]
                if prefix_tokens[point] < self.min_cache_tokens or prefix_tokens[point] <= read:
                    continue
                if key not in self.cache or self.cache[key].expires <= now:
                    self.cache[key] = CacheEntry(prefix_tokens[point], now + ttl, ttl=ttl)
                    new_keys.append(key)
                written = max(written, prefix_tokens[point] - read)
                if ttl > self.cache_ttl:
                    written_long = written
        usage = {
            "input_tokens": total - read - written,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written - written_long,
                "ephemeral_1h_input_tokens": written_long,
            },
        }
        return usage, new_keys

    def ttl_order_error(self, body: dict[str, Any]) -> str:
        """Anthropic refuses a 1-hour breakpoint after a 5-minute one."""
        ttls = [ttl for _, ttl in self._anthropic_blocks(body) if ttl is not None]
        if any(later > earlier for earlier, later in itertools.pairwise(ttls)):
            return "A 1h cache_control block must not come after a 5m cache_control block."
        return ""

    def _activate(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                if key in self.cache:
                    self.cache[key].usable = True

    # --- Anthropic -------------------------------------------------------------------------

    async def anthropic_messages(self, request: web.Request) -> web.StreamResponse:
        return await self._serve("anthropic", request, self._anthropic_stream)

    async def _anthropic_stream(self, request, body, script: Script, record) -> web.StreamResponse:
        order_error = self.ttl_order_error(body)
        if order_error:
            return self._error_response("anthropic", 400, "invalid_request_error", order_error)
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
            for token in self._tokens(block_text, script):
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
        # A length limit inside a tool call: its JSON stops half-way and the block never closes.
        cut = script.stop == "max_tokens"
        for call in script.tool_calls:
            payload = json.dumps(call.get("arguments", {}))
            payload = payload[: len(payload) // 2] if cut else payload
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
            if not cut:
                await event("content_block_stop", {"index": index})
            index += 1
            output += 5
        stop = "max_tokens" if cut else ("tool_use" if script.tool_calls else "end_turn")
        await event(
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output},
            },
        )
        await event("message_stop", {})
        return response
