from django import forms


class SessionCreateForm(forms.Form):
    name = forms.CharField(max_length=120, required=False, label="Session name")


class MessageForm(forms.Form):
    # Length and emptiness are checked by the service so every entry point shares one rule.
    text = forms.CharField(required=False, strip=False, label="Message", widget=forms.Textarea)
