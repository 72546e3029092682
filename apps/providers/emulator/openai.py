"""The emulator's OpenAI chat completions API (SSE)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from aiohttp import web

from apps.providers.emulator.core import EmulatorCore, Script, estimate_tokens


class OpenAIProtocol(EmulatorCore):
    """Chat completions streamed as SSE chunks, usage in the last one."""

    # --- OpenAI ----------------------------------------------------------------------------

    async def openai_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve("openai", request, self._openai_stream)

    # --- Azure OpenAI: the same stream, at a deployment's path, with an API version --------

    async def azure_chat(self, request: web.Request) -> web.StreamResponse:
        refused = self._azure_refusal(request)
        if refused is not None:
            return refused
        if request.match_info["deployment"] not in self.azure_deployments:
            return self._error_response(
                "openai", 404, "DeploymentNotFound",
                "The API deployment for this resource does not exist.",
            )  # fmt: skip
        return await self._serve("openai", request, self._openai_stream)

    async def azure_models(self, request: web.Request) -> web.Response:
        refused = self._azure_refusal(request)
        return refused if refused is not None else await self.list_models(request)

    def _azure_refusal(self, request: web.Request) -> web.Response | None:
        """Azure answers 404 without an API version and 401 without its `api-key` header."""
        if not request.query.get("api-version"):
            return self._error_response("openai", 404, "404", "Resource not found")
        if not request.headers.get("api-key"):
            return self._error_response(
                "openai", 401, "401", "Access denied due to missing subscription key."
            )
        return None

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
        for token in self._tokens("".join(self._texts(script)), script):
            if script.error_after_chars is not None and shown >= script.error_after_chars:
                error = {
                    "error": {
                        "message": "The server had an error",
                        "type": script.error_type or "server_error",
                    }
                }
                await self._write(response, f"data: {json.dumps(error)}\n\n")
                return response
            if script.stall_after_chars is not None and shown >= script.stall_after_chars:
                await asyncio.sleep(script.stall_seconds)
                return response
            await self._pace(script, output, started)
            await chunk([{"index": 0, "delta": {"content": token}, "finish_reason": None}])
            output += 1
            shown += len(token)
            record.text_written.append((time.monotonic(), shown))
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
