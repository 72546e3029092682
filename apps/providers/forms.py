from django import forms

from apps.providers.models import AuthStyle, ProviderKind


class CredentialForm(forms.Form):
    """The page shows only the fields of the chosen provider and way of sending the key (CSS
    on the form's own selects, so it works before any script runs)."""

    name = forms.CharField(max_length=80, label="Name")
    provider = forms.ChoiceField(choices=ProviderKind.choices, label="Provider")
    base_url = forms.URLField(
        required=False,
        label="Base URL",
        assume_scheme="https",
        help_text="Only for OpenAI-compatible servers (e.g. http://localhost:11434/v1), gateways "
        "or proxies. For Azure OpenAI: the resource's endpoint, "
        "e.g. https://my-resource.openai.azure.com.",
    )
    azure_deployment = forms.CharField(
        required=False, max_length=120, label="Deployment", help_text="The model deployment's name."
    )
    azure_api_version = forms.CharField(
        required=False,
        max_length=32,
        label="API version",
        help_text="Leave empty for the newest generally available version.",
    )
    auth_style = forms.TypedChoiceField(
        choices=AuthStyle.choices,
        required=False,
        empty_value=AuthStyle.API_KEY,  # a form without the field keeps the provider's own key
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
        help_text="Stored encrypted and never shown again. Leave empty to keep the saved key.",
    )
