from typing import cast

from django import forms
from django.conf import settings

from apps.chat.council.tools import TOOLS, tool_names
from apps.chat.models import AddressingMode
from apps.chat.records.sessions import SettingsChange
from apps.providers.models import Credential
from apps.roles.models import Role


class SessionCreateForm(forms.Form):
    name = forms.CharField(max_length=120, required=False, label="Session name")


class MessageForm(forms.Form):
    # Length and emptiness are checked by the service so every entry point shares one rule.
    text = forms.CharField(required=False, strip=False, label="Message", widget=forms.Textarea)


class SessionSettingsForm(forms.Form):
    """The session settings modal. Per-role model overrides are fields named model_<role pk>."""

    credential = forms.ModelChoiceField(
        queryset=Credential.objects.none(),  # the owner's, set per form
        required=False,
        empty_label="Demo provider (no network)",
        to_field_name="public_id",
    )
    model = forms.CharField(max_length=120, required=False)
    persona = forms.CharField(
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="About you: shared with every role.",
    )
    memory = forms.CharField(
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Notes every role can read; write-capable roles can update them.",
    )
    addressing_mode = forms.ChoiceField(choices=AddressingMode.choices, label="Addressing")
    auto_rounds = forms.IntegerField(min_value=0, label="Auto-rounds")
    tools = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Tools"
    )
    roles = forms.ModelMultipleChoiceField(
        queryset=Role.objects.all(), widget=forms.CheckboxSelectMultiple, label="Roles"
    )

    def __init__(self, *args, session, credentials, **kwargs):
        links = {link.role_id: link for link in session.session_roles.all()}
        initial = {
            "credential": session.credential,
            "model": session.model,
            "persona": session.persona,
            "memory": session.memory,
            "addressing_mode": session.addressing_mode,
            "auto_rounds": session.auto_rounds,
            "tools": [name for name in tool_names() if name not in session.disabled_tools],
            "roles": list(links),
        }
        kwargs["initial"] = initial
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["credential"]).queryset = credentials
        self.fields["auto_rounds"].widget.attrs["max"] = settings.PARLEY_MAX_AUTO_ROUNDS
        cast(forms.ChoiceField, self.fields["tools"]).choices = [
            (name, f"{name}{' (write)' if TOOLS[name].writes else ''}") for name in tool_names()
        ]
        self.role_rows = []
        for role in Role.objects.all():
            link = links.get(role.pk)
            self.fields[f"model_{role.pk}"] = forms.CharField(
                max_length=120,
                required=False,
                initial=link.model_override if link else "",
                label=f"Model for @{role.handle}",
            )
            self.fields[f"credential_{role.pk}"] = forms.ModelChoiceField(
                queryset=credentials,
                required=False,
                to_field_name="public_id",
                empty_label="Session credential",
                initial=link.credential if link else None,
                label=f"Credential for @{role.handle}",
            )
            self.role_rows.append((role, self[f"model_{role.pk}"], self[f"credential_{role.pk}"]))

    def role_table(self) -> list[dict]:
        """One row per role: taking part or not, and its model override in this session."""
        chosen = {str(value) for value in (self["roles"].value() or [])}
        return [
            {
                "role": role,
                "field": model,
                "credential": credential,
                "checked": str(role.pk) in chosen,
            }
            for role, model, credential in self.role_rows
        ]

    def clean_auto_rounds(self) -> int:
        rounds = self.cleaned_data["auto_rounds"]
        if rounds > settings.PARLEY_MAX_AUTO_ROUNDS:
            raise forms.ValidationError(
                f"At most {settings.PARLEY_MAX_AUTO_ROUNDS} auto-rounds.", code="max_value"
            )
        return rounds

    def change(self) -> SettingsChange:
        data = self.cleaned_data
        roles = list(data["roles"])
        return SettingsChange(
            credential=data["credential"],
            model=data["model"],
            persona=data["persona"],
            memory=data["memory"],
            addressing_mode=data["addressing_mode"],
            auto_rounds=data["auto_rounds"],
            disabled_tools=[name for name in tool_names() if name not in data["tools"]],
            roles=roles,
            overrides={role.pk: data.get(f"model_{role.pk}", "") for role in roles},
            role_credentials={role.pk: data.get(f"credential_{role.pk}") for role in roles},
        )
