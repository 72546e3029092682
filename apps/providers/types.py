"""Provider-neutral shapes of a chat request and of the events a stream yields."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from apps.providers.description import ListedModel

# Canonical content parts are plain dicts so they serialise straight into Message.content:
#   {"type": "text", "text": str}
#   {"type": "tool_call", "id": str, "name": str, "arguments": dict}
#   {"type": "tool_result", "tool_call_id": str, "name": str, "content": str, "is_error": bool}
#   {"type": "image", "attachment": str, "media_type": str, "name": str}
#   {"type": "document", "attachment": str, "media_type": "application/pdf", "name": str}
# An image or document part names its attachment; the bytes travel beside the messages, in
# `ChatRequest.blobs` (never base64 in a stored message), the same bytes on every request.
Part = dict[str, Any]


@dataclass(frozen=True)
class SystemBlock:
    text: str
    cache: bool = False  # place a prompt-cache breakpoint after this block


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["user", "assistant"]
    parts: tuple[Part, ...]
    cache: bool = False  # place a prompt-cache breakpoint after this message's last part


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    parameters: dict[str, Any]


AuthStyle = Literal["api_key", "bearer", "header"]


@dataclass(frozen=True)
class Auth:
    """How a credential's secret is presented, and where an Azure deployment lives.

    The secret itself travels separately (`api_key`), so this is safe to log and to hash.
    """

    style: AuthStyle = "api_key"  # the provider's own header, a bearer token, or `header`
    header: str = ""  # the custom header's name, for style "header"
    deployment: str = ""  # Azure OpenAI only
    api_version: str = ""  # Azure OpenAI only
    # Headers a credential's settings add to every request (OpenRouter's app title); not secret.
    headers: tuple[tuple[str, str], ...] = ()


NO_AUTH = Auth()


CacheTTL = Literal["5m", "1h"]


@dataclass(frozen=True)
class ChatRequest:
    model: str
    system: tuple[SystemBlock, ...]
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolDefinition, ...] = ()
    max_tokens: int = 4096
    stop_sequences: tuple[str, ...] = ()
    # How long Anthropic keeps the cache entries written at the system block's breakpoint and
    # at the messages' ("5m" or "1h"; a 1h breakpoint may not follow a 5m one).
    system_cache_ttl: CacheTTL = "5m"
    history_cache_ttl: CacheTTL = "5m"
    # Free-form hints for a provider; the demo adapter reads who is speaking from here.
    metadata: dict[str, Any] = field(default_factory=dict)
    # The bytes of the attachments the messages' image and document parts name, by id.
    blobs: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    tool_call_id: str
    name: str
    content: str  # the whole result, as stored and shown
    is_error: bool = False
    trimmed: str | None = None  # what the model was sent instead, when it was too big


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0  # the part of the cache writes kept for an hour (billed at 2x)

    def as_dict(self) -> dict[str, int]:
        return {
            "input": self.input_tokens,
            "output": self.output_tokens,
            "cache_read": self.cache_read_tokens,
            "cache_write": self.cache_write_tokens,
            "cache_write_1h": self.cache_write_1h_tokens,
        }

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )


StopReason = Literal["end", "max_tokens", "tool_use", "stop_sequence", "refusal", "other"]


@dataclass(frozen=True)
class Stop:
    reason: StopReason
    continuations: int = 0  # calls made to continue the reply after the length limit


@dataclass(frozen=True)
class Milestone:
    """Something that happened to a call besides its output, for the reply's event log: a
    retry and why, a continuation after the length limit, the tool-round limit."""

    kind: str
    detail: str = ""


StreamEvent = TextDelta | ToolCall | ToolResult | Usage | Stop | Milestone


class ProviderError(Exception):
    """A provider call failed; `retryable` says whether trying again can help."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        error_type: str = "",
        status: int = 0,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.retryable = retryable
        self.error_type = error_type
        self.status = status
        self.retry_after = retry_after


RETRYABLE_STATUSES = {408, 409, 429, 500, 502, 503, 504, 529}


def retry_after_seconds(headers) -> float | None:
    """Read retry-after-ms / retry-after (seconds) from response headers."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue
    return None


class ProviderAdapter(Protocol):
    """What every provider adapter offers; the registry maps a provider kind to one."""

    kind: str
    label: str
    default_model: str
    fallback_models: tuple[str, ...]  # offered when the provider's model list is unavailable

    def stream(
        self, request: ChatRequest, *, api_key: str = "", base_url: str = "", auth: Auth = NO_AUTH
    ) -> AsyncIterator[StreamEvent]:
        """Yield the reply's events; raise ProviderError when the call fails."""
        ...

    async def list_models(
        self, *, api_key: str = "", base_url: str = "", auth: Auth = NO_AUTH
    ) -> list[ListedModel]:
        """The provider's models (with what each reads, where its list says so); raise
        ProviderError when the call fails."""
        ...
