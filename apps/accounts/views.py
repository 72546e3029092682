"""The persona library's one view: add a persona from the dialog the session set-up opens."""

from __future__ import annotations

import json
import re

from django.core.exceptions import ValidationError
from django.shortcuts import render
from django.views.decorators.http import require_POST

from apps.accounts.personas import persona_save, personas_for_user

PICKER_ID = re.compile(r"[a-z]+-persona-pick")


@require_POST
def persona_create(request):
    """Save the persona; the picker that opened the dialog lists it, chosen."""
    picker = request.POST.get("picker", "")
    picker = picker if PICKER_ID.fullmatch(picker) else ""
    values = {"name": request.POST.get("name", ""), "text": request.POST.get("text", "")}
    try:
        persona = persona_save(owner=request.user, **values)
    except ValidationError as exc:
        context = {"errors": exc.message_dict, "values": values, "picker": picker}
        return render(request, "accounts/_persona_form.html", context, status=422)
    context = {
        "picker": picker,
        "personas": personas_for_user(user=request.user),
        "selected": persona,
    }
    response = render(request, "accounts/_persona_saved.html", context)
    # The page copies the chosen option's text into the session's persona field.
    response["HX-Trigger-After-Swap"] = json.dumps({"parley:persona-saved": {"picker": picker}})
    return response
