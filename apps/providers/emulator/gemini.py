"""The emulator's Gemini streamGenerateContent API (SSE)."""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from apps.providers.emulator.core import Script, estimate_tokens
from apps.providers.emulator.embeddings import EmbeddingsProtocol


class GeminiProtocol(EmbeddingsProtocol):
    """streamGenerateContent with alt=sse, on v1 and v1beta."""

    # --- Gemini ----------------------------------------------------------------------------

    async def gemini_generate(self, request: web.Request) -> web.StreamResponse:
        action = request.match_info["action"]
        if action.endswith((":batchEmbedContents", ":embedContent")):
            return await self.gemini_embeddings(request, action)
        if not action.endswith(":streamGenerateContent"):
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
        for token in self._tokens("".join(self._texts(script)), script):
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
        parts: list[dict[str, Any]] = [
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
