"""The emulator's embedding APIs: OpenAI's (and Ollama's) `/v1/embeddings` and Gemini's
`batchEmbedContents` / `embedContent`.

A text's vector is a hashed bag of its words (each word, lower-cased and without a plural
"s", adds ±1 in one of `DIMENSIONS` places), L2-normalised: texts that share words are near,
so a library searched through the emulator finds passages as it would through a real model.
"""

from __future__ import annotations

import json
import math
import re
import time
import zlib

from aiohttp import web

from apps.providers.emulator.core import EmulatorCore

DIMENSIONS = 256
WORD = re.compile(r"[a-z0-9]+")


def hashed_vector(text: str) -> list[float]:
    vector = [0.0] * DIMENSIONS
    for word in WORD.findall(text.lower()):
        word = word[:-1] if len(word) > 3 and word.endswith("s") else word
        digest = zlib.crc32(word.encode())
        vector[digest % DIMENSIONS] += 1.0 if digest & 0x8000_0000 else -1.0
    norm = math.sqrt(sum(value * value for value in vector)) or 1.0
    return [value / norm for value in vector]


class EmbeddingsProtocol(EmulatorCore):
    async def openai_embeddings(self, request: web.Request) -> web.Response:
        body = await self._embedding_request("openai", request)
        if self._key(request) in self.invalid_keys:
            return self._error_response("openai", 401, "authentication_error", "invalid API key")
        if body["model"] not in self.embedding_models:
            return self._error_response(
                "openai", 404, "model_not_found", f"The model `{body['model']}` does not exist"
            )
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": index, "embedding": hashed_vector(text)}
            for index, text in enumerate(texts)
        ]
        tokens = sum(len(text.split()) for text in texts)
        return web.json_response(
            {"object": "list", "data": data, "model": body["model"],
             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        )  # fmt: skip

    async def gemini_embeddings(self, request: web.Request, action: str) -> web.Response:
        body = await self._embedding_request("gemini", request)
        if self._key(request) in self.invalid_keys:
            return self._error_response("gemini", 401, "authentication_error", "invalid API key")
        model = action.partition(":")[0]
        if model not in self.embedding_models:
            return self._error_response("gemini", 404, "NOT_FOUND", f"models/{model} is not found")
        if action.endswith(":embedContent"):
            return web.json_response({"embedding": {"values": hashed_vector(_text(body))}})
        vectors = [{"values": hashed_vector(_text(one))} for one in body.get("requests", [])]
        return web.json_response({"embeddings": vectors})

    async def _embedding_request(self, provider: str, request: web.Request) -> dict:
        body = json.loads(await request.text() or "{}")
        with self._lock:
            self.embedding_requests.append((provider, body, time.monotonic()))
        return body


def _text(request: dict) -> str:
    parts = (request.get("content") or {}).get("parts") or []
    return " ".join(part.get("text", "") for part in parts)
