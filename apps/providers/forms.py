"""The credential form, derived from the providers' descriptions: their settings become
fields, and CSS generated from the descriptions shows each field only for its providers (it
works before any script runs)."""

from __future__ import annotations

from django import forms

from apps.providers.description import Setting
from apps.providers.models import AuthStyle
from apps.providers.registry import DESCRIPTIONS, provider_choices


def provider_settings() -> dict[str, Setting]:
    """Every provider's settings by name (a name two providers share is one field)."""
    found: dict[str, Setting] = {}
    for description in DESCRIPTIONS:
        for setting in description.settings:
            found.setdefault(setting.name, setting)
    return found


def visibility_css() -> str:
    """For each provider, the rules that show its fields and hide the ones it has no use for."""
    rules = []
    for d in DESCRIPTIONS:
        chosen = f'.credential-form:has(#id_provider option[value="{d.kind}"]:checked)'
        shown = [f".field-{s.name}" for s in d.settings] + [f".hint-{d.kind}"]
        rules.append(f"{chosen} :is({', '.join(shown)}) {{ display: grid; }}")
        hidden = []
        if len(d.auth_styles) == 1:
            hidden += [".field-auth_style", ".field-auth_header"]
        if d.base_url == "none":
            hidden.append(".field-base_url")
        if not d.takes_key:
            hidden.append(".field-api_key")
        if hidden:
            rules.append(f"{chosen} :is({', '.join(hidden)}) {{ display: none; }}")
    return "\n".join(rules)


class CredentialForm(forms.Form):
    name = forms.CharField(max_length=80, label="Name")
    provider = forms.ChoiceField(choices=provider_choices, label="Provider")
    base_url = forms.URLField(
        required=False,
        label="Base URL",
        assume_scheme="https",  # each provider's hint below says what to put here
    )
    auth_style = forms.TypedChoiceField(
        choices=AuthStyle.choices,
        required=False,
        empty_value="",  # a form without the field: the provider's own way
        initial=AuthStyle.API_KEY,
        label="Send the key as",
    )
    auth_header = forms.CharField(
        required=False,
        max_length=80,
        label="Header name",
        help_text="The header your gateway reads the key from, e.g. X-Gateway-Key.",
    )
    api_key = forms.CharField(
        required=False,
        label="API key or token",
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Stored encrypted and never shown again. Leave empty to keep the saved key "
        "(or if your server needs none).",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name, setting in provider_settings().items():
            self.fields[name] = forms.CharField(
                required=False, max_length=setting.max_length, label=setting.label,
                help_text=setting.help,
            )  # fmt: skip
        # The provider's settings sit right after the base URL.
        order = ["name", "provider", "base_url", *provider_settings(), "auth_style"]
        self.order_fields(order)

    @property
    def hints(self) -> list[tuple[str, str]]:
        """Each provider's sentence about its base URL, shown when it is chosen."""
        return [(d.kind, d.base_url_hint) for d in DESCRIPTIONS if d.base_url_hint]

    @property
    def setting_names(self) -> list[str]:
        return list(provider_settings())
