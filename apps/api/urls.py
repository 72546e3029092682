from django.urls import path

from apps.api import views
from apps.api.api import api

app_name = "api_tokens"


def _token_only(patterns):
    """The API authenticates by token, not by the login page's session."""
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            _token_only(pattern.url_patterns)
        else:
            pattern.callback.login_required = False
    return patterns


api_urls = _token_only(api.urls[0])

urlpatterns = [
    path("account/tokens/", views.token_list, name="token_list"),
    path("account/tokens/<int:token>/revoke/", views.token_revoke, name="token_revoke"),
]
