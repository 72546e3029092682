from typing import cast

from django import forms
from django.conf import settings

from apps.accounts.models import Persona
from apps.chat.council.prompting import GROUP_RULES
from apps.chat.council.tools import TOOLS, mcp_tools, tool_names
from apps.chat.models import AddressingMode, ToolMode, TurnMode, parse_reply_length
from apps.chat.records.memory import memory_from_json
from apps.chat.records.sessions import SettingsChange
from apps.connectors.models import McpServer
from apps.providers.models import Credential
from apps.roles.models import Role
from apps.roles.selectors import default_roles, roles_offered


def mcp_servers_field() -> forms.ModelMultipleChoiceField:
    """The servers a session offers tools from; each form sets the ones its user may use."""
    return forms.ModelMultipleChoiceField(
        queryset=McpServer.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        to_field_name="public_id",
        label="MCP servers",
    )


MEMORY_FORMATS = [("text", "Plain text"), ("json", "JSON")]


class SessionSetupForm(forms.Form):
    """What a session is set up with, in the create dialog and in Session settings: the
    credential and model, the persona (a saved one is copied in) and the memory."""

    credential = forms.ModelChoiceField(
        queryset=Credential.objects.none(),  # the owner's, set per form
        required=False,
        empty_label="Demo provider (no network)",
        to_field_name="public_id",
    )
    model = forms.CharField(max_length=120, required=False)
    persona_pick = forms.ModelChoiceField(
        queryset=Persona.objects.none(), required=False, label="Saved persona"
    )
    persona = forms.CharField(
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="About you: shared with every role. Picking a saved persona copies its text "
        "here; this session keeps its copy.",
    )
    persona_name = forms.CharField(required=False, max_length=80, label="Persona's name")
    memory = forms.CharField(required=False, max_length=20_000, widget=forms.HiddenInput)
    memory_name = forms.CharField(required=False, max_length=80, label="Memory's name")
    memory_format = forms.ChoiceField(
        choices=MEMORY_FORMATS, required=False, widget=forms.HiddenInput
    )

    def __init__(self, *args, credentials, personas=None, **kwargs):
        super().__init__(*args, **kwargs)
        personas = personas if personas is not None else Persona.objects.none()
        cast(forms.ModelChoiceField, self.fields["credential"]).queryset = credentials
        cast(forms.ModelChoiceField, self.fields["persona_pick"]).queryset = personas
        self.personas = personas

    def picked_persona(self):
        """The saved persona whose text the session holds (the picker shows it chosen)."""
        text = (self["persona"].value() or "").strip()
        return next((p for p in self.personas if text and p.text == text), None)

    def clean_memory(self) -> str:
        memory = self.cleaned_data["memory"]
        if self.data.get(self.add_prefix("memory_format")) == "json":
            return memory_from_json(memory)  # its ValidationError names line and column
        return memory

    def clean(self) -> dict:
        data = super().clean() or {}
        picked = data.get("persona_pick")
        if picked is not None and not (data.get("persona") or "").strip():
            data["persona"] = picked.text  # no script ran to copy it
        if picked is not None and data.get("persona") == picked.text:
            data["persona_name"] = data.get("persona_name") or picked.name
        return data


def one_per_handle(roles) -> list[Role]:
    """A session's roles answer to distinct handles (one person's never clash, but a room's
    session may hold another person's own role)."""
    roles = list(roles)
    handles = [role.handle for role in roles]
    twice = sorted({handle for handle in handles if handles.count(handle) > 1})
    if twice:
        raise forms.ValidationError(
            f"Two of the roles picked answer to {', '.join('@' + h for h in twice)}: "
            "take one of each out.",
            code="twice",
        )
    return roles


class SessionCreateForm(SessionSetupForm):
    name = forms.CharField(max_length=120, required=False, label="Session name")
    # Not sent (a script, an old page): the default roles.
    roles = forms.ModelMultipleChoiceField(
        queryset=Role.objects.all(),
        widget=forms.CheckboxSelectMultiple,
        label="Roles",
        required=False,
    )
    mcp_servers = mcp_servers_field()
    # The built-in tools (a picked server's tools are offered once it is part of the session).
    tools = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Tools"
    )

    def __init__(self, *args, roles, servers=None, **kwargs):
        self.tool_choices = [
            (name, f"{name}{' (write)' if TOOLS[name].writes else ''}") for name in tool_names()
        ]
        kwargs.setdefault(
            "initial",
            {"roles": [role.pk for role in default_roles()],
             "tools": [name for name, _ in self.tool_choices]},
        )  # fmt: skip
        super().__init__(*args, **kwargs)
        cast(forms.ModelMultipleChoiceField, self.fields["roles"]).queryset = roles
        field = cast(forms.ModelMultipleChoiceField, self.fields["mcp_servers"])
        field.queryset = servers if servers is not None else McpServer.objects.none()
        cast(forms.ChoiceField, self.fields["tools"]).choices = self.tool_choices

    def disabled_tools(self) -> list[str]:
        """The built-in tools left unticked ("tools_offered" tells an old page from none)."""
        if "tools_offered" not in self.data:
            return []
        chosen = set(self.cleaned_data.get("tools") or [])
        return [name for name, _ in self.tool_choices if name not in chosen]

    def clean_roles(self) -> list[Role] | None:
        roles = one_per_handle(self.cleaned_data["roles"])
        if not roles and "roles_offered" in self.data:
            raise forms.ValidationError("Pick at least one role to talk with.", code="required")
        return roles or None

    def role_packs(self) -> list[str]:
        roles = cast(forms.ModelMultipleChoiceField, self.fields["roles"]).queryset
        return sorted({role.pack for role in roles or [] if role.pack})  # the list's own query


class MessageForm(forms.Form):
    # Length and emptiness are checked by the service so every entry point shares one rule.
    text = forms.CharField(required=False, strip=False, label="Message", widget=forms.Textarea)


class SessionSettingsForm(SessionSetupForm):
    """The session settings modal. Per-role model overrides are fields named model_<role pk>."""

    addressing_mode = forms.ChoiceField(choices=AddressingMode.choices, label="Addressing")
    auto_rounds = forms.IntegerField(min_value=0, label="Auto-rounds")
    turn_mode = forms.ChoiceField(choices=TurnMode.choices, label="Turn order")
    group_rules = forms.CharField(
        max_length=5_000,
        widget=forms.Textarea(attrs={"rows": 4}),
        label="Group rules",
        help_text="What every role is told about the group chat; each role's persona is added "
        "on top. Empty it to go back to Parley's default.",
        required=False,
    )
    reply_length = forms.CharField(
        max_length=16,
        label="Reply length",
        help_text="short, normal, long, or a number of words.",
    )
    turn_token_budget = forms.IntegerField(
        min_value=0, max_value=100_000_000, label="Token budget per turn", required=False
    )
    turn_time_limit = forms.IntegerField(
        min_value=0, max_value=86_400, label="Time limit per turn (seconds)", required=False
    )
    stop_phrase = forms.CharField(max_length=80, required=False, label="Stop phrase")
    ai_mentions = forms.BooleanField(
        required=False, label="A reply that mentions @another_role has that role answer next"
    )
    auto_route = forms.BooleanField(
        required=False,
        label="Auto-route messages without a mention to the best-placed role",
    )
    tool_mode = forms.ChoiceField(
        choices=ToolMode.choices, label="How roles use tools", required=False
    )
    library_passages = forms.BooleanField(
        required=False,
        label="Put the library's best passages in the request of the roles a message addresses "
        "(for models that cannot call tools)",
    )
    mcp_servers = mcp_servers_field()
    tools = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Tools"
    )
    roles = forms.ModelMultipleChoiceField(
        queryset=Role.objects.all(), widget=forms.CheckboxSelectMultiple, label="Roles"
    )

    def __init__(self, *args, session, credentials, personas=None, servers=None, **kwargs):
        links = {link.role_id: link for link in session.session_roles.all()}
        servers = servers if servers is not None else McpServer.objects.none()
        # Built-in tools, then every tool of the servers this user may pick, by name.
        self.tool_choices = [
            (name, f"{name}{' (write)' if TOOLS[name].writes else ''}") for name in tool_names()
        ] + [
            (name, f"{name}{'' if tool.read_only else ' (write)'}")
            for name, tool in sorted(mcp_tools(servers.order_by("name")).items())
        ]
        initial = {
            "credential": session.credential,
            "model": session.model,
            "persona": session.persona,
            "persona_name": session.persona_name,
            "memory": session.memory,
            "memory_name": session.memory_name,
            "addressing_mode": session.addressing_mode,
            "auto_rounds": session.auto_rounds,
            "turn_mode": session.turn_mode,
            "group_rules": session.group_rules or GROUP_RULES,
            "reply_length": session.reply_length,
            "turn_token_budget": session.turn_token_budget,
            "turn_time_limit": session.turn_time_limit,
            "stop_phrase": session.stop_phrase,
            "ai_mentions": session.ai_mentions,
            "auto_route": session.auto_route,
            "tool_mode": session.tool_mode,
            "library_passages": session.library_passages,
            "mcp_servers": list(session.mcp_servers.all()),
            "tools": [name for name, _ in self.tool_choices if name not in session.disabled_tools],
            "roles": list(links),
        }
        kwargs["initial"] = initial
        super().__init__(*args, credentials=credentials, personas=personas, **kwargs)
        self.fields["auto_rounds"].widget.attrs["max"] = settings.PARLEY_MAX_AUTO_ROUNDS
        cast(forms.ModelMultipleChoiceField, self.fields["mcp_servers"]).queryset = servers
        cast(forms.ChoiceField, self.fields["tools"]).choices = self.tool_choices
        self.role_rows = []
        order = [handle for handle in session.round_order if isinstance(handle, str)]
        # What the owner may add, and whatever roles the session has already (another's own).
        roles = roles_offered(session.owner, also=[link.role_id for link in links.values()])
        cast(forms.ModelMultipleChoiceField, self.fields["roles"]).queryset = roles
        for position, role in enumerate(roles, start=len(order) + 1):
            link = links.get(role.pk)
            self.fields[f"order_{role.pk}"] = forms.IntegerField(
                min_value=1,
                max_value=999,
                required=False,
                initial=order.index(role.handle) + 1 if role.handle in order else position,
                label=f"Round position of @{role.handle}",
            )
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
            self.role_rows.append(
                (
                    role,
                    self[f"model_{role.pk}"],
                    self[f"credential_{role.pk}"],
                    self[f"order_{role.pk}"],
                )
            )

    def role_table(self) -> list[dict]:
        """One row per role: taking part or not, and its model override in this session."""
        chosen = {str(value) for value in (self["roles"].value() or [])}
        return [
            {
                "role": role,
                "field": model,
                "credential": credential,
                "order": order,
                "checked": str(role.pk) in chosen,
            }
            for role, model, credential, order in self.role_rows
        ]

    def clean_roles(self) -> list[Role]:
        return one_per_handle(self.cleaned_data["roles"])

    def clean_auto_rounds(self) -> int:
        rounds = self.cleaned_data["auto_rounds"]
        if rounds > settings.PARLEY_MAX_AUTO_ROUNDS:
            raise forms.ValidationError(
                f"At most {settings.PARLEY_MAX_AUTO_ROUNDS} auto-rounds.", code="max_value"
            )
        return rounds

    def clean_reply_length(self) -> str:
        try:
            return parse_reply_length(self.cleaned_data["reply_length"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None

    def clean_group_rules(self) -> str:
        """Never empty: blank (or the default text) means Parley's default rules."""
        rules = self.cleaned_data["group_rules"].strip()
        return "" if rules == GROUP_RULES else rules

    def change(self) -> SettingsChange:
        data = self.cleaned_data
        roles = list(data["roles"])
        # Auto-rounds go round in the positions given (ties: the roles' own order).
        positions = {role.handle: data.get(f"order_{role.pk}") or 999 for role in roles}
        round_order = sorted(positions, key=lambda handle: positions[handle])
        return SettingsChange(
            credential=data["credential"],
            model=data["model"],
            persona=data["persona"],
            memory=data["memory"],
            persona_name=data["persona_name"],
            memory_name=data["memory_name"],
            addressing_mode=data["addressing_mode"],
            auto_rounds=data["auto_rounds"],
            disabled_tools=[name for name, _ in self.tool_choices if name not in data["tools"]],
            mcp_servers=list(data.get("mcp_servers") or []),
            roles=roles,
            overrides={role.pk: data.get(f"model_{role.pk}", "") for role in roles},
            role_credentials={role.pk: data.get(f"credential_{role.pk}") for role in roles},
            turn_mode=data["turn_mode"],
            round_order=round_order,
            group_rules=data["group_rules"],
            reply_length=data["reply_length"],
            turn_token_budget=data.get("turn_token_budget") or 0,
            turn_time_limit=data.get("turn_time_limit") or 0,
            stop_phrase=data.get("stop_phrase", ""),
            ai_mentions=data["ai_mentions"],
            auto_route=data["auto_route"],
            tool_mode=data["tool_mode"] or self.initial["tool_mode"],  # not sent: unchanged
            library_passages=data["library_passages"],
        )
