"""The lorebook editor's forms: a role's entries, keys written as comma-separated words."""

from __future__ import annotations

from django import forms

from apps.roles.lorebook import (
    MAX_CONTENT_CHARS,
    MAX_ENTRIES,
    MAX_KEYS,
    MAX_SCAN_DEPTH,
    MAX_TOKEN_BUDGET,
)
from apps.roles.models import LoreEntry


class KeysField(forms.Field):
    """A list of keys as the person types them: "Eldoria, the glade"."""

    widget = forms.TextInput

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value) -> list[str]:
        text = value if isinstance(value, str) else ""
        if len(text) > 4000:
            raise forms.ValidationError("Keys are at most 4,000 characters in all.")
        keys = [key.strip() for key in text.split(",") if key.strip()]
        if len(keys) > MAX_KEYS:
            raise forms.ValidationError(f"At most {MAX_KEYS} keys an entry.")
        return keys


class LoreEntryForm(forms.ModelForm):
    keys = KeysField(required=False, help_text="Comma-separated.")
    secondary_keys = KeysField(required=False, label="Secondary keys")
    content = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}), max_length=MAX_CONTENT_CHARS
    )

    class Meta:
        model = LoreEntry
        fields = ["name", "keys", "secondary_keys", "selective", "content", "enabled",
                  "constant", "case_sensitive", "insertion_order", "priority"]  # fmt: skip

    def clean(self):
        data = super().clean() or {}
        if not data.get("keys") and not data.get("constant") and not self.errors:
            raise forms.ValidationError("Give it a key, or make it constant (always in).")
        return data


LoreFormSet = forms.modelformset_factory(
    LoreEntry, form=LoreEntryForm, extra=1, can_delete=True, max_num=MAX_ENTRIES,
    validate_max=True,
)  # fmt: skip


class BookForm(forms.Form):
    scan_depth = forms.IntegerField(
        min_value=1, max_value=MAX_SCAN_DEPTH, required=False, label="Messages scanned",
        help_text="How many of the latest messages are read for keys (empty: 4).",
    )  # fmt: skip
    token_budget = forms.IntegerField(
        min_value=1, max_value=MAX_TOKEN_BUDGET, required=False, label="Token budget",
        help_text="At most this many tokens of entries a reply (empty: the server's, 1,024).",
    )  # fmt: skip
    recursive_scanning = forms.BooleanField(
        required=False, label="Entries can bring in other entries"
    )
