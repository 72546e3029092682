"""The Roles page: the roles a person may add to sessions, character cards brought in as roles
(a file, a few, or a whole folder as a pack), and any role or pack taken out as V3 cards."""

from __future__ import annotations

import io
import zipfile

from django.core.exceptions import ValidationError
from django.db.models import Count
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.attachments.headers import content_disposition
from apps.roles import services
from apps.roles.cards import MAX_CARD_FILE_BYTES, card_document, write_card
from apps.roles.forms import BookForm, LoreFormSet
from apps.roles.models import LoreEntry, Role
from apps.roles.selectors import lore_of, roles_offered


def _role(request, handle: str) -> Role:
    role = roles_offered(request.user).filter(handle=handle).first()
    if role is None:
        raise Http404("No such role.")
    return role


@require_http_methods(["GET", "POST"])
def role_list(request):
    report, error = None, ""
    if request.method == "POST":
        uploads = request.FILES.getlist("cards")
        too_big = [u.name for u in uploads if (u.size or 0) > MAX_CARD_FILE_BYTES]
        files = [(u.name, u) for u in uploads if u.name not in too_big]
        try:
            if not uploads:
                raise ValidationError("Choose one or more character cards (.png or .json).")
            report = services.roles_from_cards(
                owner=request.user, files=files, pack=request.POST.get("pack", "")
            )
            report.refused += [f"“{name}” is over 20 MB." for name in too_big]
        except ValidationError as exc:
            error = " ".join(exc.messages)
    roles = (
        roles_offered(request.user)
        .annotate(lore_count=Count("lore"))
        .order_by("pack", "sort_order", "display_name")
    )
    packs = sorted({role.pack for role in roles if role.pack})
    return render(
        request,
        "roles/roles.html",
        {"roles": roles, "packs": packs, "report": report, "error": error},
        status=422 if error or (report and not report.made) else 200,
    )


@require_GET
def role_card(request, handle: str, extension: str):
    if extension not in ("png", "json"):
        raise Http404("Cards are .png or .json.")
    role = _role(request, handle)
    document = card_document(role, lore_of(role))
    response: HttpResponse
    if extension == "json":
        response = JsonResponse(document, json_dumps_params={"ensure_ascii": False, "indent": 2})
    else:
        response = HttpResponse(write_card(document, _picture(role)), content_type="image/png")
    response["Content-Disposition"] = content_disposition(f"{role.handle}.{extension}")
    return response


@require_GET
def pack_cards(request, pack: str):
    """Every role of a pack as V3 card PNGs in one .zip (a folder to share or import again)."""
    roles = list(roles_offered(request.user).filter(pack=pack))
    if not roles:
        raise Http404("No such pack.")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for role in roles:
            archive.writestr(
                f"{role.handle}.png", write_card(card_document(role, lore_of(role)), _picture(role))
            )
    response = HttpResponse(out.getvalue(), content_type="application/zip")
    response["Content-Disposition"] = content_disposition(f"{slugify(pack) or 'pack'}.zip")
    return response


@require_http_methods(["GET", "POST"])
def role_lorebook(request, handle: str):
    """A role's lorebook: its entries and how they are chosen; a person edits their own
    roles' (everyone's are the admin's), and sees everyone's read-only."""
    role = _role(request, handle)
    editable = role.owner_id == request.user.pk
    entries = LoreEntry.objects.filter(role=role)
    book = (role.card or {}).get("lorebook") or {}
    formset = LoreFormSet(request.POST or None, queryset=entries, prefix="lore")
    book_form = BookForm(request.POST or None, initial=book)
    saved = False
    if request.method == "POST":
        if not editable:
            return HttpResponse("Only your own roles' lorebooks can be edited here.", status=403)
        if formset.is_valid() and book_form.is_valid():
            services.lorebook_save(role=role, formset=formset, settings=book_form.cleaned_data)
            saved = True
            formset = LoreFormSet(queryset=entries.all(), prefix="lore")
    context = {"role": role, "formset": formset, "book_form": book_form, "editable": editable,
               "saved": saved, "entries": entries}  # fmt: skip
    invalid = request.method == "POST" and not saved
    return render(request, "roles/lorebook.html", context, status=422 if invalid else 200)


@require_POST
def role_delete(request, handle: str):
    try:
        services.role_delete(role=_role(request, handle), by=request.user)
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=403)
    return redirect("roles:role_list")


def _picture(role: Role) -> bytes | None:
    if not role.avatar:
        return None
    with role.avatar.open("rb") as stored:
        return stored.read()
