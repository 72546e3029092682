"""OpenAI chat completions, and any OpenAI-compatible server, through the `openai` SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai
import orjson

from apps.providers.adapters.clients import (
    aiohttp_transport,
    client_key,
    client_scope,
    response_lines,
)
from apps.providers.adapters.translate import to_openai
from apps.providers.description import (
    DescribedAdapter,
    ListedModel,
    ProviderDescription,
    Reads,
    Setting,
)
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
    retry_after_seconds,
)

AZURE_API_VERSION = "2024-10-21"  # the newest generally available data-plane version
FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def _error(exc: Exception, label: str) -> ProviderError:
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error", body) if isinstance(body, dict) else {}
        error_type = (
            (error.get("type") or error.get("code") or "") if isinstance(error, dict) else ""
        )
        return ProviderError(
            f"{label}: {exc.message}",
            retryable=exc.status_code in RETRYABLE_STATUSES,
            error_type=str(error_type),
            status=exc.status_code,
            retry_after=retry_after_seconds(exc.response.headers if exc.response else None),
        )
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError(
            f"{label} did not answer in time.", retryable=True, error_type="timeout"
        )
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError(
            f"Cannot reach {label} (check the base URL and that the server is running).",
            retryable=True,
            error_type="connection",
        )
    if isinstance(exc, openai.APIError):  # an error object inside the stream
        return ProviderError(f"{label}: {exc.message}", retryable=True, error_type="stream_error")
    raise exc


def _collect_call(calls: dict[int, dict], call: dict[str, Any]) -> None:
    """Tool calls arrive in pieces: an id and a name, then the arguments a fragment at a time."""
    entry = calls.setdefault(call.get("index", 0), {"id": "", "name": "", "args": ""})
    function = call.get("function") or {}
    if call.get("id"):
        entry["id"] = call["id"]
    if function.get("name"):
        entry["name"] = function["name"]
    if function.get("arguments"):
        entry["args"] += function["arguments"]


def _usage(raw: dict[str, Any]) -> Usage:
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return Usage(
        input_tokens=(raw.get("prompt_tokens") or 0) - cached,
        output_tokens=raw.get("completion_tokens") or 0,
        cache_read_tokens=cached,
    )


async def _events(response) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of a chat-completions SSE stream, until `[DONE]`.

    The SDK's own stream builds a model object per chunk (about ten times the cost of this on
    the hot path); the SDK still makes the request: auth, base URL, HTTP errors.
    """
    async for line in response_lines(response):
        if not line.startswith(b"data:"):
            continue  # blank separators, comments, `event:` lines
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:  # a lone surrogate escape (\ud800): orjson refuses it
            chunk = json.loads(data)
        if chunk.get("error"):
            error = chunk["error"] if isinstance(chunk["error"], dict) else {}
            raise openai.APIError(
                str(error.get("message") or chunk["error"]), response.http_request, body=error
            )
        yield chunk


def _untransformed(payload: dict[str, Any]) -> dict[str, Any]:
    """The request's arguments with its transcript and tools sent as they are.

    The SDK walks every parameter against its type hints before sending (a recursive copy of
    each message: the largest cost of starting a reply on a long thread). Parley's payload is
    already the wire format, so the bulky parts go in `extra_body`, which the SDK merges into
    the JSON body untouched; the required `messages` argument is an empty stand-in it replaces.
    """
    bulky = {key: payload.pop(key) for key in ("messages", "tools") if key in payload}
    return {**payload, "messages": [], "extra_body": bulky}


def _omitted(auth: Auth) -> dict[str, Any] | None:
    """Per-request headers: none of the SDK's bearer token when a custom header carries the key
    (the SDK honours an omission only on the request itself)."""
    return {"Authorization": openai.Omit()} if auth.style == "header" else None


OPENAI = ProviderDescription(
    kind="openai",
    label="OpenAI",
    wire="openai",
    base_url_hint="Leave empty for OpenAI's API; a gateway or proxy's URL otherwise.",
    auth_styles=("api_key", "bearer", "header"),
    default_model="gpt-4.1",
    fallback_models=("gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini"),
    cheap_model="gpt-4.1-mini",
    embedding_model="text-embedding-3-small",
    model_names="gpt-<version>[-size], e.g. gpt-4.1 or gpt-4.1-mini",
    reads=Reads(images=True, pdfs=True),
    max_tokens_by_model=(("gpt-4.1", 16000), ("gpt-4o", 8192)),
    refuses=tuple((family, ("max_tokens",)) for family in ("o1", "o3", "o4", "gpt-5")),
)
OPENAI_COMPATIBLE = ProviderDescription(
    kind="openai_compatible",
    label="OpenAI-compatible server",
    wire="openai_compatible",
    error_label="the OpenAI-compatible server",
    base_url="required",
    base_url_hint="The server's OpenAI-compatible address, ending in /v1, "
    "e.g. http://localhost:8000/v1 (vLLM), http://localhost:1234/v1 (LM Studio).",
    auth_styles=("api_key", "bearer", "header"),
    needs_key=False,
    default_model="llama3.1",
    model_names="as the server names them",
)
AZURE_OPENAI = ProviderDescription(
    kind="azure_openai",
    label="Azure OpenAI",
    wire="azure_openai",
    base_url="required",
    base_url_hint="The resource's endpoint, e.g. https://my-resource.openai.azure.com.",
    settings=(
        Setting(
            "azure_deployment",
            "Deployment",
            help="The model deployment's name.",
            required=True,
            max_length=120,
        ),
        Setting(
            "azure_api_version",
            "API version",
            help="Leave empty for the newest generally available version.",
            default=AZURE_API_VERSION,
            pattern=r"\d{4}-\d{2}-\d{2}(-preview)?",
            pattern_message="An API version looks like 2024-10-21 or 2025-04-01-preview.",
            max_length=32,
        ),
    ),
    model_names="the deployment is the model",
    reads=Reads(images=True),
    max_tokens_by_model=(("gpt-4.1", 16000), ("gpt-4o", 8192)),
)


class OpenAIAdapter(DescribedAdapter):
    # A streaming request's timeouts: for the answer to start, and between two of its reads.
    stream_timeout_seconds = 120.0

    def _client(
        self, api_key: str, base_url: str, auth: Auth, timeout: float | None = None
    ) -> openai.AsyncOpenAI:
        timeout = self.stream_timeout_seconds if timeout is None else timeout
        # The SDK sends the key as a bearer token already; a gateway's own header replaces it
        # (and `_omitted` takes the bearer token off each request).
        headers = dict(auth.headers)
        if auth.style == "header":
            headers[auth.header] = api_key
        return openai.AsyncOpenAI(
            api_key=api_key or "not-needed",
            base_url=base_url or None,
            default_headers=headers or None,
            max_retries=0,
            timeout=timeout,
            http_client=_http_client(timeout),
        )

    def _limits(self, request: ChatRequest) -> dict:
        """The reply's token limit and the usage chunk, as this kind's server takes them."""
        refused = self.description.refused_fields(request.model)
        limit = "max_completion_tokens" if "max_tokens" in refused else "max_tokens"
        fields: dict = {limit: request.max_tokens}
        if "stream_options" not in refused:  # else the usage is not reported (counted as 0)
            fields["stream_options"] = {"include_usage": True}
        return fields

    async def stream(
        self, request: ChatRequest, *, api_key: str = "", base_url: str = "", auth: Auth = NO_AUTH
    ) -> AsyncIterator[StreamEvent]:
        calls: dict[int, dict] = {}
        finish = None
        usage = Usage()
        try:
            async with (
                client_scope(
                    client_key(self.kind, api_key, base_url, auth),
                    lambda: self._client(api_key, base_url, auth),
                    lambda client: client.close(),
                ) as client,
                client.chat.completions.with_streaming_response.create(
                    **_untransformed(to_openai(request)),
                    **self._limits(request),
                    stream=True,
                    extra_headers=_omitted(auth),
                ) as response,
            ):
                async for chunk in _events(response):
                    if chunk.get("usage"):
                        usage = _usage(chunk["usage"])
                    for choice in chunk.get("choices") or []:
                        delta = choice.get("delta") or {}
                        if delta.get("content"):
                            yield TextDelta(delta["content"])
                        for call in delta.get("tool_calls") or []:
                            _collect_call(calls, call)
                        finish = choice.get("finish_reason") or finish
        except openai.APIError as exc:
            raise _error(exc, self.label) from exc
        except httpx2.TimeoutException as exc:
            raise _error(openai.APITimeoutError(exc.request), self.label) from exc
        except httpx2.TransportError as exc:
            raise _error(openai.APIConnectionError(request=exc.request), self.label) from exc
        for _, entry in sorted(calls.items()):
            try:
                arguments = json.loads(entry["args"] or "{}")
            except ValueError:
                arguments = {"_unparsed": entry["args"]}
            yield ToolCall(id=entry["id"], name=entry["name"], arguments=arguments)
        yield usage
        yield Stop(FINISH_REASONS.get(finish or "", "other"))

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
            async with self._client(api_key, base_url, auth, timeout=60) as client:
                answer = await client.embeddings.create(
                    model=model, input=texts, encoding_format="float", extra_headers=_omitted(auth)
                )
        except openai.APIError as exc:
            raise _error(exc, self.label) from exc
        return [item.embedding for item in sorted(answer.data, key=lambda item: item.index)]

    async def list_models(
        self, *, api_key: str = "", base_url: str = "", auth: Auth = NO_AUTH
    ) -> list[ListedModel]:
        try:
            async with self._client(api_key, base_url, auth, timeout=15) as client:
                page = await client.models.list(extra_headers=_omitted(auth))
        except openai.APIError as exc:
            raise _error(exc, self.label) from exc
        listed = [ListedModel(m.id, _listed_reads(m.model_extra or {})) for m in page.data]
        return sorted(listed, key=lambda model: model.name)


class OpenAICompatibleAdapter(OpenAIAdapter):
    """Any server speaking OpenAI's chat completions (and the presets built on it)."""


class AzureOpenAIAdapter(OpenAIAdapter):
    """Azure OpenAI: the same chat completions, addressed by resource endpoint, deployment and
    API version, with the key in Azure's `api-key` header (the SDK's Azure client)."""

    def _client(
        self, api_key: str, base_url: str, auth: Auth, timeout: float | None = None
    ) -> openai.AsyncOpenAI:
        timeout = self.stream_timeout_seconds if timeout is None else timeout
        return openai.AsyncAzureOpenAI(
            api_key=api_key or "missing",
            azure_endpoint=base_url,
            azure_deployment=auth.deployment or None,
            api_version=auth.api_version or AZURE_API_VERSION,
            max_retries=0,
            timeout=timeout,
            http_client=_http_client(timeout),
        )

    async def list_models(
        self, *, api_key: str = "", base_url: str = "", auth: Auth = NO_AUTH
    ) -> list[ListedModel]:
        """The credential's deployment, once the resource has accepted the key."""
        await super().list_models(api_key=api_key, base_url=base_url, auth=auth)
        return [ListedModel(auth.deployment)] if auth.deployment else []


def _listed_reads(extra: dict[str, Any]) -> Reads | None:
    """What a model list entry says the model reads, where the server says it: OpenRouter's
    `architecture.input_modalities` ("image", "file"), or a `capabilities` list with "vision"
    (as Ollama's own API names it). OpenAI's own list says nothing: None."""
    architecture = extra.get("architecture")
    if isinstance(architecture, dict) and isinstance(architecture.get("input_modalities"), list):
        modalities = architecture["input_modalities"]
        return Reads(images="image" in modalities, pdfs="file" in modalities)
    capabilities = extra.get("capabilities")
    if isinstance(capabilities, list) and all(isinstance(c, str) for c in capabilities):
        return Reads(images="vision" in capabilities)
    return None


def _http_client(timeout: float) -> openai.DefaultAioHttpClient:
    """The SDK's aiohttp transport: over the worker loop's shared session where it has one."""
    return openai.DefaultAioHttpClient(timeout=timeout, transport=aiohttp_transport())
