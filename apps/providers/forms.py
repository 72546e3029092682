from django import forms

from apps.providers.models import ProviderKind


class CredentialForm(forms.Form):
    name = forms.CharField(max_length=80, label="Name")
    provider = forms.ChoiceField(choices=ProviderKind.choices, label="Provider")
    base_url = forms.URLField(
        required=False,
        label="Base URL",
        assume_scheme="https",
        help_text="Only for OpenAI-compatible servers (e.g. http://localhost:11434/v1) or proxies.",
    )
    api_key = forms.CharField(
        required=False,
        label="API key",
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Stored encrypted and never shown again. Leave empty to keep the saved key.",
    )
