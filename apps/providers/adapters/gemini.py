"""Google Gemini through the official `google-genai` SDK (async client, SSE streaming)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from google import genai
from google.genai import errors, types

from apps.providers.adapters.clients import aiohttp_session, client_key, client_scope
from apps.providers.adapters.translate import to_gemini_contents
from apps.providers.description import DescribedAdapter, ListedModel, ProviderDescription, Reads
from apps.providers.types import (
    NO_AUTH,
    RETRYABLE_STATUSES,
    Auth,
    ChatRequest,
    ProviderError,
    Stop,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)

FINISH_REASONS: dict[str, StopReason] = {
    "STOP": "end",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "refusal",
}


def _client(api_key: str, base_url: str, timeout_ms: int = 120_000) -> genai.Client:
    # The SDK speaks aiohttp itself; in a worker loop, over the loop's shared session.
    options = types.HttpOptions(
        timeout=timeout_ms, base_url=base_url or None, aiohttp_client=aiohttp_session()
    )
    return genai.Client(api_key=api_key or "missing", http_options=options)


def _error(exc: Exception) -> ProviderError:
    if isinstance(exc, errors.APIError):
        return ProviderError(
            f"Gemini: {exc.message or exc.status} ({exc.status or exc.code})",
            retryable=(exc.code or 0) in RETRYABLE_STATUSES,
            error_type=str(exc.status or ""),
            status=exc.code or 0,
        )
    name = type(exc).__name__
    if "Timeout" in name:
        return ProviderError("Gemini did not answer in time.", retryable=True, error_type="timeout")
    if "Connect" in name or isinstance(exc, OSError):
        return ProviderError(
            "Cannot reach the Gemini API (check the base URL and the network).",
            retryable=True,
            error_type="connection",
        )
    raise exc


DESCRIPTION = ProviderDescription(
    kind="gemini",
    label="Google Gemini",
    wire="gemini",
    error_label="Gemini",
    base_url_hint="Leave empty for Google's API; a gateway or proxy's URL otherwise.",
    default_model="gemini-2.5-flash",
    fallback_models=("gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"),
    cheap_model="gemini-2.5-flash",
    embedding_model="gemini-embedding-001",
    model_names="gemini-<version>-<size>, e.g. gemini-2.5-pro",
    reads=Reads(images=True, pdfs=True),
    max_tokens_by_model=(("gemini-2.5", 16000), ("gemini", 8192)),
)


class GeminiAdapter(DescribedAdapter):
    async def stream(
        self, request: ChatRequest, *, api_key: str = "", base_url: str = "", auth: Auth = NO_AUTH
    ) -> AsyncIterator[StreamEvent]:
        config = types.GenerateContentConfig(
            system_instruction="\n\n".join(block.text for block in request.system) or None,
            max_output_tokens=request.max_tokens,
            stop_sequences=list(request.stop_sequences) or None,
            tools=[
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(
                            name=t.name,
                            description=t.description,
                            parameters_json_schema=t.parameters,
                        )
                        for t in request.tools
                    ]
                )
            ]
            if request.tools
            else None,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        finish, usage = None, Usage()
        calls: list[ToolCall] = []
        try:
            async with client_scope(
                client_key(self.kind, api_key, base_url),
                lambda: _client(api_key, base_url).aio,
                lambda client: client.aclose(),
            ) as client:
                stream = await client.models.generate_content_stream(
                    model=request.model,
                    contents=to_gemini_contents(request.messages, request.blobs),
                    config=config,
                )
                async for chunk in stream:
                    for candidate in chunk.candidates or []:
                        for part in (candidate.content.parts if candidate.content else None) or []:
                            if part.text and not part.thought:
                                yield TextDelta(part.text)
                            if part.function_call:
                                call = part.function_call
                                calls.append(
                                    ToolCall(
                                        id=call.id or f"call_{uuid.uuid4().hex[:12]}",
                                        name=call.name or "",
                                        arguments=dict(call.args or {}),
                                    )
                                )
                        if candidate.finish_reason:
                            finish = candidate.finish_reason.value
                    meta = chunk.usage_metadata
                    if meta:
                        cached = meta.cached_content_token_count or 0
                        usage = Usage(
                            input_tokens=(meta.prompt_token_count or 0) - cached,
                            output_tokens=meta.candidates_token_count or 0,
                            cache_read_tokens=cached,
                        )
        except Exception as exc:
            raise _error(exc) from exc
        for tool_call in calls:
            yield tool_call
        yield usage
        yield Stop("tool_use" if calls else FINISH_REASONS.get(finish or "", "other"))

    async def embed(
        self,
        texts: list[str],
        *,
        model: str,
        api_key: str = "",
        base_url: str = "",
        auth: Auth = NO_AUTH,
    ) -> list[list[float]]:
        try:
            contents: list[types.ContentUnion] = list(texts)
            async with _client(api_key, base_url, timeout_ms=60_000).aio as client:
                answer = await client.models.embed_content(model=model, contents=contents)
        except Exception as exc:
            raise _error(exc) from exc
        return [list(embedding.values or []) for embedding in answer.embeddings or []]

    async def list_models(
        self, *, api_key: str = "", base_url: str = "", auth: Auth = NO_AUTH
    ) -> list[ListedModel]:
        # Gemini's list does not say what a model reads: the description does.
        try:
            async with _client(api_key, base_url, timeout_ms=15_000).aio as client:
                pager = await client.models.list()
                return [
                    ListedModel((model.name or "").removeprefix("models/")) async for model in pager
                ]
        except Exception as exc:
            raise _error(exc) from exc
