"""The sign-in page: a username and password, the team's provider, or both."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.exceptions import PermissionDenied

from apps.accounts.forms import LoginForm
from apps.accounts.oidc.views import REASONS


class SignInView(auth_views.LoginView):
    template_name = "accounts/login.html"
    authentication_form = LoginForm
    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):
        if not settings.PARLEY_LOCAL_LOGIN:
            raise PermissionDenied("Sign in through your organisation's provider.")
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.update(
            local_login=settings.PARLEY_LOCAL_LOGIN,
            provider_name=settings.PARLEY_OIDC_NAME if settings.PARLEY_OIDC_ISSUER else "",
            refused=REASONS.get(self.request.GET.get("refused", "")),
        )
        return context
