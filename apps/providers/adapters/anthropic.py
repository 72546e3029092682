"""Anthropic Messages API through the official `anthropic` SDK (async client, streaming)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anthropic

from apps.providers.adapters.clients import aiohttp_transport, client_key, client_scope
from apps.providers.adapters.translate import to_anthropic
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
    retry_after_seconds,
)

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end",
    "max_tokens": "max_tokens",
    "tool_use": "tool_use",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
}
RETRYABLE_STREAM_ERRORS = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


def _only_header(name: str, value: str) -> dict:
    """The gateway's header, and neither of the SDK's own (one could come from the environment)."""
    return {name: value, "Authorization": anthropic.Omit(), "X-Api-Key": anthropic.Omit()}


def _client(
    api_key: str, base_url: str, auth: Auth, timeout: float = 120
) -> anthropic.AsyncAnthropic:
    # Retries are ours (calls.py): only before any text was shown, honouring retry-after.
    options: dict = {
        "base_url": base_url or None,
        "max_retries": 0,
        "timeout": timeout,
        # The SDK's aiohttp transport, over the worker loop's shared session where it has one.
        "http_client": anthropic.DefaultAioHttpClient(
            timeout=timeout, transport=aiohttp_transport()
        ),
    }
    if auth.headers:
        options["default_headers"] = dict(auth.headers)
    if auth.style == "bearer":  # a gateway in front of the API: Authorization: Bearer …
        return anthropic.AsyncAnthropic(auth_token=api_key or "missing", **options)
    if auth.style == "header":  # the gateway's own header, and no x-api-key beside it
        headers = {**options.pop("default_headers", {}), **_only_header(auth.header, api_key)}
        return anthropic.AsyncAnthropic(api_key=None, default_headers=headers, **options)
    return anthropic.AsyncAnthropic(api_key=api_key or "missing", **options)


def _error(exc: Exception) -> ProviderError:
    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error")
        if not isinstance(error, dict):
            error = {}
        error_type = error.get("type", "")
        message = error.get("message") or str(exc)
        if exc.status_code == 200:  # an `error` event in the middle of a stream
            retryable = error_type in RETRYABLE_STREAM_ERRORS
        else:
            retryable = exc.status_code in RETRYABLE_STATUSES
        return ProviderError(
            f"Anthropic: {message} ({error_type or exc.status_code})",
            retryable=retryable,
            error_type=error_type,
            status=exc.status_code,
            retry_after=retry_after_seconds(exc.response.headers if exc.response else None),
        )
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderError(
            "Anthropic did not answer in time.", retryable=True, error_type="timeout"
        )
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderError(
            "Cannot reach the Anthropic API (check the base URL and the network).",
            retryable=True,
            error_type="connection",
        )
    raise exc


DESCRIPTION = ProviderDescription(
    kind="anthropic",
    label="Anthropic",
    wire="anthropic",
    error_label="Anthropic",
    base_url_hint="Leave empty for Anthropic's API; a gateway or proxy's URL otherwise.",
    auth_styles=("api_key", "bearer", "header"),
    default_model="claude-sonnet-5",
    fallback_models=("claude-opus-5", "claude-sonnet-5", "claude-haiku-4-5"),
    cheap_model="claude-haiku-4-5",
    model_names="claude-<family>-<version>, e.g. claude-sonnet-5",
    reads=Reads(images=True, pdfs=True),
    max_tokens_by_model=(
        ("claude-opus", 16000),
        ("claude-sonnet", 16000),
        ("claude-haiku", 8192),
        ("claude", 8192),
    ),
)


class AnthropicAdapter(DescribedAdapter):
    async def stream(
        self, request: ChatRequest, *, api_key: str = "", base_url: str = "", auth: Auth = NO_AUTH
    ) -> AsyncIterator[StreamEvent]:
        try:
            # Closing the client inside the loop: left to the garbage collector, it would try
            # to close its connections after the reply's event loop has gone.
            async with (
                client_scope(
                    client_key(self.kind, api_key, base_url, auth),
                    lambda: _client(api_key, base_url, auth),
                    lambda client: client.close(),
                ) as client,
                client.messages.stream(**to_anthropic(request)) as stream,
            ):
                async for event in stream:
                    if event.type == "text" and event.text:
                        yield TextDelta(event.text)
                final = await stream.get_final_message()
        except anthropic.APIError as exc:
            raise _error(exc) from exc
        for block in final.content:
            if block.type == "tool_use":
                yield ToolCall(id=block.id, name=block.name, arguments=dict(block.input or {}))
        usage = final.usage
        yield Usage(
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
            cache_read_tokens=usage.cache_read_input_tokens or 0,
            cache_write_tokens=usage.cache_creation_input_tokens or 0,
            cache_write_1h_tokens=(
                (usage.cache_creation.ephemeral_1h_input_tokens or 0) if usage.cache_creation else 0
            ),
        )
        yield Stop(STOP_REASONS.get(final.stop_reason or "", "other"))

    async def list_models(
        self, *, api_key: str = "", base_url: str = "", auth: Auth = NO_AUTH
    ) -> list[ListedModel]:
        try:
            async with _client(api_key, base_url, auth, timeout=15) as client:
                page = await client.models.list(limit=100)
        except anthropic.APIError as exc:
            raise _error(exc) from exc
        return [ListedModel(model.id, _listed_reads(model)) for model in page.data]


def _listed_reads(model: anthropic.types.ModelInfo) -> Reads | None:
    """What the model list's capabilities say the model reads (None on an older API)."""
    capabilities = model.capabilities
    if capabilities is None:
        return None
    image = getattr(capabilities, "image_input", None)
    pdf = getattr(capabilities, "pdf_input", None)
    return Reads(images=bool(image and image.supported), pdfs=bool(pdf and pdf.supported))
