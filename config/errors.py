"""Error pages that say why: a refused request explains itself, in words the page can show."""

from django.http import HttpResponse
from django.shortcuts import render


def permission_denied(request, exception=None):
    """A 403 with its reason: plain text for htmx (the page shows it as it is), else a page."""
    reason = str(exception or "") or "You may not do that here."
    if request.headers.get("HX-Request"):
        return HttpResponse(reason, status=403, content_type="text/plain; charset=utf-8")
    return render(request, "403.html", {"reason": reason}, status=403)
