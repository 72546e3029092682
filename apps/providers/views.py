"""Saved credentials: list, add, edit, delete, test, and the model list for forms."""

from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.providers import services
from apps.providers.forms import CredentialForm, provider_settings, visibility_css
from apps.providers.registry import get_adapter
from apps.providers.selectors import credentials_for_user

EDITABLE = [name for name in CredentialForm.base_fields if name != "api_key"]


@require_GET
def credential_list(request):
    credentials = credentials_for_user(user=request.user)
    return render(request, "providers/credential_list.html", {"credentials": credentials})


@require_http_methods(["GET", "POST"])
def credential_edit(request, credential=None):
    instance = None
    if credential is not None:
        instance = get_object_or_404(credentials_for_user(user=request.user), public_id=credential)
    initial = (
        {**{field: getattr(instance, field) for field in EDITABLE}, **instance.options}
        if instance
        else {}
    )
    form = CredentialForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            services.credential_save(
                owner=request.user,
                **{field: data[field] for field in [*EDITABLE, *provider_settings()]},
                # Editing with an empty key keeps the saved one.
                api_key=data["api_key"] or (None if instance else ""),
                credential=instance,
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            return redirect("providers:credential_list")
    return render(
        request,
        "providers/credential_form.html",
        {"form": form, "credential": instance, "visibility_css": visibility_css()},
    )


@require_POST
def credential_delete(request, credential):
    credential = get_object_or_404(credentials_for_user(user=request.user), public_id=credential)
    services.credential_delete(credential=credential)
    return redirect("providers:credential_list")


@require_POST
def credential_test(request, credential):
    credential = get_object_or_404(credentials_for_user(user=request.user), public_id=credential)
    check = services.credential_test(credential=credential)
    return render(
        request, "providers/_test_result.html", {"check": check, "credential": credential}
    )


@require_GET
def credential_models(request):
    """<option>s for the model select; `credential` empty means the demo provider."""
    public_id = request.GET.get("credential") or ""
    credential = None
    if public_id:
        try:
            public_id = uuid.UUID(public_id)
        except ValueError:
            return HttpResponse("Choose a saved credential.", status=400)
        credential = get_object_or_404(credentials_for_user(user=request.user), public_id=public_id)
    models = services.credential_models(credential=credential)
    selected = request.GET.get("model", "")
    # The model saved with this very credential stays selectable even when the provider does
    # not list it; after a switch to another credential, a model its list lacks (another
    # provider's) gives way to that provider's default.
    same_credential = request.GET.get("saved_credential", "") == str(public_id or "")
    if selected and selected not in models and same_credential:
        models = [selected, *models]
    elif selected not in models:
        default = get_adapter(credential.provider if credential else "demo").default_model
        selected = default if default in models else (models[0] if models else "")
    return render(
        request, "providers/_model_options.html", {"models": models, "selected": selected}
    )
