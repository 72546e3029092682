"""What Parley knows about a kind of provider, in one typed description per kind.

Each adapter module describes the kinds it serves (`DESCRIPTION`, or several for the OpenAI
family), and a preset (`presets/`) is a description alone, served by an adapter it names as its
`wire`. Everything else is derived from the descriptions: the credential form's fields and when
each shows, the checks on a saved credential, the admin, the cheap model for summaries and
classifications, the default `max_tokens`, and what a model can read. This module imports
nothing of the project, so adapters, presets and models can all use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeVar

# The adapters that speak each wire protocol (see `registry.WIRES`).
Wire = Literal["anthropic", "openai", "openai_compatible", "azure_openai", "gemini", "demo"]
BaseUrlNeed = Literal["none", "optional", "required"]
AUTH_STYLES = ("api_key", "bearer", "header")
T = TypeVar("T")


@dataclass(frozen=True)
class Setting:
    """A non-secret value a credential of this kind carries besides the key (an Azure
    deployment, an OpenRouter app title): a field on the form, stored in `Credential.options`,
    and, with `header`, sent as that HTTP header on every request."""

    name: str
    label: str
    help: str = ""
    required: bool = False
    default: str = ""  # saved when the person leaves the field empty
    pattern: str = ""  # a full match; `pattern_message` says what is expected
    pattern_message: str = ""
    header: str = ""
    max_length: int = 200

    def check(self, value: str) -> str | None:
        """What is wrong with `value`, in a sentence; None when it is fine."""
        if not value and self.required:
            return f"Give the {self.label.lower()}: this provider needs it."
        if not value:
            return None
        if len(value) > self.max_length:
            return f"{self.label} is at most {self.max_length} characters."
        if any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF for c in value):
            return f"{self.label} holds characters that cannot be stored or sent."
        if self.pattern and not re.fullmatch(self.pattern, value):
            return self.pattern_message or f"{self.label} is not in the expected form."
        return None


@dataclass(frozen=True)
class Reads:
    """What a model reads besides text."""

    images: bool = False
    pdfs: bool = False

    def describe(self) -> str:
        kinds = [name for name, ok in (("images", self.images), ("PDFs", self.pdfs)) if ok]
        return "text, " + " and ".join(kinds) if kinds else "text only"


@dataclass(frozen=True)
class ListedModel:
    """A model as its provider's model list gives it; `reads` when the list says what the
    model reads (Anthropic's capabilities, OpenRouter's input modalities), else None."""

    name: str
    reads: Reads | None = None


@dataclass(frozen=True)
class ProviderDescription:
    kind: str  # stored on credentials and messages
    label: str  # shown to people ("OpenRouter")
    wire: Wire  # the adapter that speaks its protocol
    error_label: str = ""  # how errors name it ("the OpenAI-compatible server"); label if empty
    base_url: BaseUrlNeed = "optional"
    default_base_url: str = ""  # used when the person leaves the base URL empty
    base_url_hint: str = ""  # one sentence under the base URL field, for this kind
    auth_styles: tuple[str, ...] = ("api_key",)  # ways it takes the key; the first is its own
    needs_key: bool = True
    takes_key: bool = True  # False: nothing to send (the demo)
    settings: tuple[Setting, ...] = ()
    default_model: str = ""
    fallback_models: tuple[str, ...] = ()  # offered when the model list cannot be read
    cheap_model: str = ""  # summaries, digests, classifications; empty: the reply's model
    # The model its embeddings API gives the library's vectors with; empty: it has none (the
    # library then uses its embedded model).
    embedding_model: str = ""
    model_names: str = ""  # how it names models, shown by the model picker
    reads: Reads = Reads()  # what its models read, unless `reads_by_model` says otherwise
    reads_by_model: tuple[tuple[str, Reads], ...] = ()  # model name prefix -> reads
    max_tokens_by_model: tuple[tuple[str, int], ...] = ()  # model name prefix -> max_tokens
    default_max_tokens: int = 4096
    # Request fields its server refuses, by model name prefix ("" for every model): the adapter
    # leaves them out (or sends what replaces them), and the emulator can refuse them as the
    # server does, so a kind that passes its tests works for real. OpenAI's reasoning models
    # refuse `max_tokens` (they take `max_completion_tokens`); some OpenAI-compatible servers
    # refuse `stream_options`.
    refuses: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        unknown = set(self.auth_styles) - set(AUTH_STYLES)
        if unknown or not self.auth_styles:
            raise ValueError(f"{self.kind}: unknown ways to send the key {sorted(unknown)}")
        if self.base_url == "required" and self.default_base_url:
            raise ValueError(f"{self.kind}: a required base URL has no default")
        if len({s.name for s in self.settings}) != len(self.settings):
            raise ValueError(f"{self.kind}: two settings share a name")

    @property
    def name_in_errors(self) -> str:
        return self.error_label or self.label

    def setting(self, name: str) -> Setting | None:
        return next((s for s in self.settings if s.name == name), None)

    def reads_for(self, model: str) -> Reads:
        """What `model` reads, by the longest matching prefix, else the kind's default."""
        return _longest_prefix(self.reads_by_model, model, self.reads)

    def max_tokens_for(self, model: str) -> int:
        """A generous `max_tokens` (a tiny one is the commonest cause of cut-off replies)."""
        return _longest_prefix(self.max_tokens_by_model, model, self.default_max_tokens)

    def refused_fields(self, model: str) -> frozenset[str]:
        """The request fields its server refuses for `model`."""
        return frozenset(
            name for prefix, names in self.refuses if model.startswith(prefix) for name in names
        )

    def headers(self, options: dict[str, str]) -> tuple[tuple[str, str], ...]:
        """The HTTP headers a credential's settings add to every request."""
        return tuple(
            (s.header, options[s.name]) for s in self.settings if s.header and options.get(s.name)
        )


def _longest_prefix(rules: tuple[tuple[str, T], ...], model: str, default: T) -> T:
    matches = [(len(prefix), value) for prefix, value in rules if model.startswith(prefix)]
    return max(matches, key=lambda match: match[0])[1] if matches else default


class DescribedAdapter:
    """An adapter serving one description: its kind, the name its errors use, and its models
    come from there (one adapter class serves every preset of its wire)."""

    def __init__(self, description: ProviderDescription) -> None:
        self.description = description
        self.kind = description.kind
        self.label = description.name_in_errors
        self.default_model = description.default_model
        self.fallback_models = description.fallback_models
